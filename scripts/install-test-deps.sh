#!/usr/bin/env bash
# Install the Debian services the test suite starts itself (PostgreSQL, Redis). Idempotent: does nothing
# when they are already installed. Needs root (CI and the dev machines run as root) and apt-get.
set -euo pipefail

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "warning: ${need[*]} missing and cannot be installed here (need root and apt-get);" \
       "tests marked 'services' will be skipped" >&2
  exit 0
fi
echo "installing test services: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The Debian package starts a cluster and a server on the default ports; the tests start their own.
service postgresql stop >/dev/null 2>&1 || true
service redis-server stop >/dev/null 2>&1 || true
