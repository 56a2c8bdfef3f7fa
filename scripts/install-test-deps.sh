#!/usr/bin/env bash
# Install the Debian services the test suite starts itself (PostgreSQL, Redis). Idempotent: does nothing
# when they are already installed. Needs root (CI and the dev machines run as root) and apt-get.
# Without them the 'services' tests skip; under ROCKY_REQUIRE_SERVICES=1 (CI, .ci/run) this script exits
# non-zero with the reason instead, so a CI run can never pass without PostgreSQL and Redis.
set -euo pipefail

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
fail() {
  if [ "${ROCKY_REQUIRE_SERVICES:-}" = "1" ]; then
    echo "error: $1 (ROCKY_REQUIRE_SERVICES=1: the 'services' tests must run)" >&2
    exit 1
  fi
  echo "warning: $1; tests marked 'services' will be skipped" >&2
  exit 0
}
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  fail "${need[*]} missing and cannot be installed here (need root and apt-get)"
fi
echo "installing test services: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >/dev/null || ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
  fail "apt-get could not install ${need[*]}"
fi
# The Debian package starts a cluster and a server on the default ports; the tests start their own.
service postgresql stop >/dev/null 2>&1 || true
service redis-server stop >/dev/null 2>&1 || true
