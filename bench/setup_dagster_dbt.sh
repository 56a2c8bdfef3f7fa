#!/usr/bin/env bash
# A separate venv with dbt (as bench/setup_dbt.sh installs it) plus the Dagster of the project venv and its
# dagster-dbt: the peer of the through-Dagster budget (bench/dagster_dbt_bench.py). Never the project venv.
# Idempotent: does nothing when the venv already imports the pinned dagster-dbt.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
VENV="${DAGSTER_DBT_VENV:-$ROOT/bench/work/venv-dagster-dbt}"
DAGSTER_VERSION="$("$ROOT/.venv/bin/python" -c 'import dagster; print(dagster.__version__)')"
# Dagster's libraries are versioned 0.(minor+16).patch next to dagster 1.minor.patch
DAGSTER_DBT_VERSION="0.$(( $(echo "$DAGSTER_VERSION" | cut -d. -f2) + 16 )).$(echo "$DAGSTER_VERSION" | cut -d. -f3)"

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "
from importlib.metadata import version; import sys
sys.exit(0 if version('dagster-dbt') == '$DAGSTER_DBT_VERSION' else 1)" 2>/dev/null; then
    echo "dagster-dbt venv ready: $VENV (dagster $DAGSTER_VERSION, dagster-dbt $DAGSTER_DBT_VERSION)"
    exit 0
fi
BENCH_VENV="$VENV" "$HERE/setup_dbt.sh"
"$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "dagster==$DAGSTER_VERSION" "dagster-dbt==$DAGSTER_DBT_VERSION"
"$VENV/bin/python" -c "import dagster_dbt, dbt.version; print('dagster-dbt', dagster_dbt.__version__)"
