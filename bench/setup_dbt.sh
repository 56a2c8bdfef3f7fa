#!/usr/bin/env bash
# Create the separate benchmark venv holding dbt-core + dbt-duckdb (the peer Rocky is measured against).
#
# dbt-core 1.12 declares `dbt-core-experimental-parser`, whose build downloads a binary from the internet
# and fails on machines that reach only package registries. dbt does not need it to run models, so we
# install dbt-core and dbt-duckdb with --no-deps and then their remaining requirements explicitly.
# Idempotent: does nothing when the venv already imports the pinned versions.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
VENV="${BENCH_VENV:-$ROOT/.venv-bench}"
PY="${BENCH_PYTHON:-python3.11}"

DBT_CORE_VERSION="1.12.6"
DBT_DUCKDB_VERSION="1.11.1"
# Same DuckDB as the project venv, so every configuration runs the identical engine.
DUCKDB_VERSION="$("$ROOT/.venv/bin/python" -c 'import duckdb; print(duckdb.__version__)' 2>/dev/null || echo 2.0.1)"

if [[ -x "$VENV/bin/dbt" ]] && "$VENV/bin/python" - "$DBT_CORE_VERSION" "$DBT_DUCKDB_VERSION" "$DUCKDB_VERSION" <<'EOF'
import sys
from importlib.metadata import version
want = dict(zip(("dbt-core", "dbt-duckdb", "duckdb"), sys.argv[1:]))
sys.exit(0 if all(version(k) == v for k, v in want.items()) else 1)
EOF
then
    echo "bench venv ready: $VENV (dbt-core $DBT_CORE_VERSION, dbt-duckdb $DBT_DUCKDB_VERSION, duckdb $DUCKDB_VERSION)"
    exit 0
fi

echo "creating bench venv at $VENV" >&2
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" --no-deps "dbt-core==$DBT_CORE_VERSION" "dbt-duckdb==$DBT_DUCKDB_VERSION"
# dbt-core's requirements minus dbt-core-experimental-parser, plus dbt-duckdb's (dbt-common, dbt-adapters).
"${PIP[@]}" \
    "duckdb==$DUCKDB_VERSION" \
    "agate>=1.7.0,<1.15" \
    "click>=8.3.0,<9.0" \
    "daff>=1.3.46" \
    "dbt-adapters>=1.24.5,<2.0" \
    "dbt-common>=1.37.5,<2.0" \
    "dbt-extractor>=0.5.0,<=0.6" \
    "dbt-protos>=1.0.514,<2.0" \
    "jinja2>=3.1.3,<4" \
    "jsonschema>=4.19.1,<5.0" \
    "mashumaro[msgpack]>=3.9,<3.18" \
    "metricflow>=0.213.0,<1.0" \
    "networkx>=2.3,<4.0" \
    "opentelemetry-api>=1.26,<2.0" \
    "packaging>20.9" \
    "pathspec>=0.9,<1.1" \
    "protobuf>=6.0,<8.0" \
    "pydantic<3" \
    "python-dotenv>=1.2" \
    "pytz>=2015.7" \
    "pyyaml>=6.0" \
    "requests<3.0.0" \
    "snowplow-tracker>=1.0.2,<2.0" \
    "sqlparse>=0.5.5,<0.7.0" \
    "typing-extensions>=4.4"
# The adapters/common packages may pull dbt-core back in with its full requirements; the pins above keep
# resolution offline-safe, and this check fails the setup if dbt cannot start.
"$VENV/bin/dbt" --version
