#!/usr/bin/env bash
# Set up what the `spark` tests need, once (make test's setup runs it; nothing installs at test time):
#   1. Java 17 (Debian's openjdk-17-jre-headless) when no `java` is on PATH or in JAVA_HOME;
#   2. the [spark] extra in the venv (pyspark[connect]==4.3.0 carries the Spark Connect server), when
#      missing; pip builds the wheel from the sdist once (~40-75 s) and reuses it from its wheel cache;
#   3. the venv's AppCDS archive of the Connect server (start-up ~10 s -> ~4 s), when missing or stale.
# Idempotent and quick when everything is there (a few seconds: it imports pyspark to check it). Never
# fails the setup: what is missing is reported, and the tests skip (or fail under ROCKY_REQUIRE_SERVICES=1)
# with the same reason.
# Usage: bash scripts/install-spark.sh [path/to/venv/python]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-.venv/bin/python}"

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"; return; fi
  command -v java || true
}

java_major() {
  # `openjdk version "17.0.15" 2025-04-15` -> 17 (and "1.8.0_x" -> 1)
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1
}

JAVA="$(java_bin)"
if [ -z "$JAVA" ] || [ "$(java_major "$JAVA")" -lt 17 ] 2>/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "spark: installing Java 17 (openjdk-17-jre-headless)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null
    JAVA="$(java_bin)"
  else
    echo "warning: Java 17 missing and cannot be installed here (need root and apt-get);" \
         "tests marked 'spark' will be skipped" >&2
    exit 0
  fi
fi

if [ ! -x "$PY" ]; then
  echo "warning: $PY not found (run make venv); skipping the pyspark check and the AppCDS archive" >&2
  exit 0
fi

if ! "$PY" - <<'EOF' 2>/dev/null
import importlib.metadata as md
import tomllib
spark = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["spark"]
pin = next(r for r in spark if r.startswith("pyspark"))
assert md.version("pyspark") == pin.split("==")[1]
import pyspark.sql.connect.session  # noqa: F401  (grpc, pandas, pyarrow: the [connect] extra)
EOF
then
  echo "spark: installing the [spark] extra into $PY's environment" >&2
  mapfile -t reqs < <("$PY" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["spark"]))')
  "$PY" -m pip install -q "${reqs[@]}"
fi

# The archive lives in the venv (it records the jars' paths), so a fresh clone's CI run, which starts the
# server three times, would spend more writing it (70-190 s measured on a loaded machine) than it saves
# (~8 s a start): CI skips it.
if [ "${CI:-}" = "true" ]; then
  exit 0
fi
# Reports "present" at once; writing takes a server start, a warm-up and the JVM's dump at exit.
if ! "$PY" -m tests.fixtures.spark_server --write-archive --if-missing; then
  echo "warning: the AppCDS archive could not be written; the Spark Connect server starts without it" >&2
fi
