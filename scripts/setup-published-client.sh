#!/usr/bin/env bash
# The published client venv (.venv-published): PyPI dagster-rocky 1.74.0 + rocky-sdk 0.29.0, the clients
# tests/dagster/test_published_client.py drives against our engine. Cheap and cached by a stamp:
#   - `python -m venv --without-pip`, then our .venv's pip installs the two packages (--no-deps) into it;
#   - a .pth line appends our .venv's site-packages (dagster and the rest are already there). Python does
#     not process the .pth files of a directory a .pth line adds, so our editable dagster_rocky (found
#     through its own .pth finder) is not importable there: the published dagster_rocky is the one imported;
#   - shim/rocky, the version shim: answers `--version` as the published client expects (our engine has its
#     own version, not upstream's) and execs our rocky otherwise.
# Usage: scripts/setup-published-client.sh [OUR_VENV] [TARGET]   (defaults .venv and .venv-published)
set -euo pipefail

OURS="$(cd "${1:-.venv}" && pwd)"
TARGET="${2:-.venv-published}"
DAGSTER_ROCKY=1.74.0
ROCKY_SDK=0.29.0
#: what the shim answers to --version: the engine release the published client was made with
UPSTREAM_VERSION=1.74.0
STAMP="$TARGET/.stamp-$DAGSTER_ROCKY-$ROCKY_SDK-$UPSTREAM_VERSION"

if [ -f "$STAMP" ] && [ -x "$TARGET/shim/rocky" ]; then
  exit 0
fi
rm -rf "$TARGET"
"$OURS/bin/python" -m venv --without-pip "$TARGET"
TARGET="$(cd "$TARGET" && pwd)"
"$OURS/bin/python" -m pip --python "$TARGET/bin/python" install -q --no-deps \
  "dagster-rocky==$DAGSTER_ROCKY" "rocky-sdk==$ROCKY_SDK"
SITE="$("$TARGET/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
OUR_SITE="$("$OURS/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$OUR_SITE" > "$SITE/_rocky_dev_site.pth"
mkdir -p "$TARGET/shim"
cat > "$TARGET/shim/rocky" <<SHIM
#!/bin/sh
# version shim: the published client checks \`rocky --version\` against upstream's releases
if [ "\$1" = "--version" ]; then
  echo "rocky $UPSTREAM_VERSION"
  exit 0
fi
exec "$OURS/bin/rocky" "\$@"
SHIM
chmod +x "$TARGET/shim/rocky"
touch "$STAMP"
