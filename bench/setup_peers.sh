#!/usr/bin/env bash
# Install the replication peers (issue 20) next to dbt, never into the project's .venv:
#
#   .venv-bench         (shared with dbt; checked: these packages add to dbt's set and change none of it)
#                       dlt 1.31 with sql_database, pyarrow and the duckdb destination, connectorx,
#                       the ADBC PostgreSQL driver, psycopg 3 (dlt reflects tables through SQLAlchemy 2.1, whose postgresql:// dialect is psycopg 3),
#                       Sling 1.4.11 plus its Linux binary, and py-spy for profiling a rocky run
#   .venv-bench-rocky   rocky as a user installs it: `pip install .[postgres]` from this tree (a wheel, not
#                       the editable dev install) with its runtime dependencies only. The project's .venv also
#                       holds dagster, pyspark and pandas, and pyarrow imports the numpy it finds: measured in
#                       the dev venv a rocky process starts ~0.3 s of CPU later than a user's does, which on an
#                       incremental pass of ~1 s is what the budget compares. Reinstalled from the tree on
#                       every run (the peers' venvs are kept), so the bench measures the code it sits beside.
#   .venv-bench-duckdb15  DuckDB 1.5.5: PyPI has DuckDB's extensions only up to 1.5.5, and the project's
#                       duckdb refuses a file built for another version (and crashes when told to ignore the
#                       mismatch). Holds the postgres extension (its own CTAS configuration) and the duckdb CLI
#                       that Sling's DuckDB target drives, with the json and httpfs extensions Sling INSTALLs.
#
# Everything comes from PyPI wheels; nothing downloads at run time:
# - the `sling` package would fetch its binary from the internet on first import; the `sling-linux-amd64`
#   wheel ships it, and the bench runs that binary directly;
# - Sling's DuckDB target would fetch the duckdb CLI; the `duckdb-cli` wheel ships it, and the bench points
#   Sling at it with DUCKDB_PATH;
# - Sling then runs `INSTALL json` and reads its CSV stream over http (httpfs); the CLI would download both.
#   The extension wheels' files go where INSTALL looks first, `<home>/.duckdb/extensions/v1.5.5/linux_amd64/`,
#   with <home> = .venv-bench-duckdb15/sling-home, which the bench passes to Sling as HOME;
# - DuckDB derives an extension's entry point from its file name: the postgres extension is copied to
#   postgres_scanner.duckdb_extension and LOADed by path.
# Idempotent: exits at once when both peer venvs already have the pinned versions (after refreshing rocky's).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
VENV="${BENCH_VENV:-$ROOT/.venv-bench}"
SCAN_VENV="${BENCH_DUCKDB15_VENV:-$ROOT/.venv-bench-duckdb15}"
ROCKY_VENV="${BENCH_ROCKY_VENV:-$ROOT/.venv-bench-rocky}"
PY="${BENCH_PYTHON:-python3.11}"

DLT_VERSION="1.31.0"
CONNECTORX_VERSION="0.4.6"
ADBC_VERSION="1.13.0"
SLING_VERSION="1.4.11"
DUCKDB_CLI_VERSION="1.5.5"
DUCKDB15_VERSION="1.5.5"
PY_SPY_VERSION="0.4.3"
PSYCOPG_VERSION="$("$ROOT/.venv/bin/python" -c 'import psycopg; print(psycopg.__version__)' 2>/dev/null || echo 3.3.9)"
DUCKDB_VERSION="$("$ROOT/.venv/bin/python" -c 'import duckdb; print(duckdb.__version__)' 2>/dev/null || echo 2.0.1)"
PYARROW_VERSION="$("$ROOT/.venv/bin/python" -c 'import pyarrow; print(pyarrow.__version__)' 2>/dev/null || echo 26.0.1)"

have() {  # have VENV_PYTHON name==version ...: all installed at exactly these versions
    "$1" - "${@:2}" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    ok = all(version(n) == v for n, v in (a.split("==") for a in sys.argv[1:]))
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
EOF
}

PEERS=("dlt==$DLT_VERSION" "connectorx==$CONNECTORX_VERSION" "adbc-driver-postgresql==$ADBC_VERSION"
       "adbc-driver-manager==$ADBC_VERSION" "sling==$SLING_VERSION" "sling-linux-amd64==$SLING_VERSION"
       "py-spy==$PY_SPY_VERSION" "psycopg==$PSYCOPG_VERSION" "psycopg-binary==$PSYCOPG_VERSION"
       "duckdb==$DUCKDB_VERSION" "pyarrow==$PYARROW_VERSION")
SCAN=("duckdb==$DUCKDB15_VERSION" "duckdb-cli==$DUCKDB_CLI_VERSION")
for ext in postgres json httpfs; do SCAN+=("duckdb-extension-$ext==$DUCKDB15_VERSION"); done
EXT="$SCAN_VENV/postgres_scanner.duckdb_extension"
HOME_EXT="$SCAN_VENV/sling-home/.duckdb/extensions/v$DUCKDB15_VERSION/linux_amd64"

# rocky from this tree: the dependencies once (pinned to the project venv's driver, engine and Arrow), then
# the package itself on every run without touching them.
if [[ ! -x "$ROCKY_VENV/bin/rocky" ]]; then
    echo "creating rocky's bench venv at $ROCKY_VENV" >&2
    "$PY" -m venv "$ROCKY_VENV"
    "$ROCKY_VENV/bin/pip" install --quiet --disable-pip-version-check "$ROOT[postgres]" \
        "duckdb==$DUCKDB_VERSION" "pyarrow==$PYARROW_VERSION" "psycopg[binary]==$PSYCOPG_VERSION"
fi
"$ROCKY_VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$ROOT"
"$ROCKY_VENV/bin/python" -c 'import rocky_engine.cli.main, psycopg, duckdb, pyarrow' \
    || { echo "rocky's bench venv $ROCKY_VENV cannot import rocky" >&2; exit 1; }
if "$ROCKY_VENV/bin/python" -c 'import numpy' 2>/dev/null; then
    echo "rocky's bench venv $ROCKY_VENV has numpy, which a user's install does not: remove the venv" >&2
    exit 1
fi

if [[ -x "$VENV/bin/python" ]] && have "$VENV/bin/python" "${PEERS[@]}" \
    && [[ -x "$SCAN_VENV/bin/python" ]] && have "$SCAN_VENV/bin/python" "${SCAN[@]}" && [[ -f "$EXT" ]] \
    && [[ -f "$HOME_EXT/httpfs.duckdb_extension" ]]; then
    echo "replication peers ready: $VENV (dlt $DLT_VERSION, connectorx $CONNECTORX_VERSION, adbc $ADBC_VERSION," \
         "sling $SLING_VERSION), $SCAN_VENV (duckdb $DUCKDB15_VERSION, its CLI, postgres/json/httpfs extensions)"
    exit 0
fi

PIP_FLAGS=(install --quiet --disable-pip-version-check)
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "creating bench venv at $VENV" >&2
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" "${PIP_FLAGS[@]}" --upgrade pip
fi
# duckdb and pyarrow pinned to the project's, so the peers that write through the Python package (dlt, the direct paths)
# run the same engine as rocky and dbt.
"$VENV/bin/pip" "${PIP_FLAGS[@]}" "dlt[duckdb,sql_database,parquet]==$DLT_VERSION" "${PEERS[@]:1}"

if [[ ! -x "$SCAN_VENV/bin/python" ]]; then
    echo "creating DuckDB $DUCKDB15_VERSION venv at $SCAN_VENV" >&2
    "$PY" -m venv "$SCAN_VENV"
fi
"$SCAN_VENV/bin/pip" "${PIP_FLAGS[@]}" "${SCAN[@]}"
ext_file() {  # ext_file NAME: the extension file inside the duckdb-extension-NAME wheel
    "$SCAN_VENV/bin/python" - "$1" <<'EOF'
import importlib, pathlib, sys
name = sys.argv[1]
pkg = pathlib.Path(importlib.import_module(f"duckdb_extension_{name}").__file__).parent
hits = sorted(pkg.glob(f"extensions/*/{name}.duckdb_extension"))
sys.exit(f"no {name}.duckdb_extension in duckdb-extension-{name}") if not hits else print(hits[-1])
EOF
}
mkdir -p "$HOME_EXT"
for ext in json httpfs; do
    cp "$(ext_file "$ext")" "$HOME_EXT/$ext.duckdb_extension.tmp"
    mv "$HOME_EXT/$ext.duckdb_extension.tmp" "$HOME_EXT/$ext.duckdb_extension"
done
cp "$(ext_file postgres)" "$EXT.tmp" && mv "$EXT.tmp" "$EXT"

# Fail the setup now, not in the middle of a measurement, if a peer cannot start offline.
"$VENV/bin/python" -c 'import dlt, connectorx, adbc_driver_postgresql.dbapi, duckdb, pyarrow, sqlalchemy, psycopg'
"$VENV/bin/python" -c 'import sling_linux_amd64, pathlib, os, sys
b = pathlib.Path(sling_linux_amd64.__file__).parent / "bin" / "sling-linux-amd64"
sys.exit(0 if os.access(b, os.X_OK) else f"{b} is not executable")'
"$SCAN_VENV/bin/python" -c "import duckdb; duckdb.connect().execute(\"LOAD '$EXT'\")"
HOME="$SCAN_VENV/sling-home" "$SCAN_VENV/lib/python3.11/site-packages/duckdb_cli/duckdb" -c "INSTALL json; INSTALL httpfs; LOAD httpfs"
echo "replication peers installed: $VENV, $SCAN_VENV"
