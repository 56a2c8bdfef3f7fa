"""Child program of the replication-peers workload: dlt copying PostgreSQL tables into a DuckDB file.

    replication_peers_dlt.py BACKEND URI DB PAIRS_JSON PIPELINES_DIR

The way dlt's documentation sets up a SQL database copy: one `sql_table` resource per source table with
`backend` = `connectorx` or `pyarrow` and `incremental=dlt.sources.incremental("updated_at")`, all resources
in one `pipeline.run` (so dlt may extract and load them concurrently), `write_disposition="append"`, into
the `duckdb` destination. The resources share one SQLAlchemy engine (dlt's documented way to pass a
connection): given the URI, each resource opens its own engine, and 200 of them exhaust the server's 100
connections. With the pyarrow backend each resource holds a pooled connection while it is open, and dlt's
default `round_robin` extraction opens all 200 at once (SQLAlchemy's pool of 15 times out), so that backend
runs with dlt's `fifo` mode (`EXTRACT__NEXT_ITEM_MODE`): one table after the other.
PIPELINES_DIR holds the pipeline's local state between the first and the second
pass (the harness empties it before each configuration's first pass, like the target file), so the second
pass copies only rows newer than the first pass's `updated_at`. The target of a pair `schema.name` becomes
dataset `schema`, table `name`; every pair of one call shares the dataset.

Prints {"rows": rows dlt reports it normalized for the copied tables, "inproc_s", "import_s"}.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

# No telemetry calls (no network here) and no progress chatter on stdout, which carries the JSON.
os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")

import dlt  # noqa: E402
import sqlalchemy  # noqa: E402
from dlt.sources.sql_database import sql_table  # noqa: E402

_IMPORT_S = time.perf_counter() - _T0
BACKENDS = ("connectorx", "pyarrow")


def run(backend: str, uri: str, db: str, pairs: list[tuple[str, str]], pipelines_dir: str) -> int:
    if backend == "pyarrow":
        os.environ.setdefault("EXTRACT__NEXT_ITEM_MODE", "fifo")
    datasets = {target.split(".")[0] for _, target in pairs}
    if len(datasets) != 1:
        raise SystemExit(f"all targets must share one schema (dataset), got {sorted(datasets)}")
    pipeline = dlt.pipeline(pipeline_name="bench", destination=dlt.destinations.duckdb(db),
                            dataset_name=datasets.pop(), pipelines_dir=pipelines_dir)
    engine = sqlalchemy.create_engine(uri)
    resources = []
    for source, target in pairs:
        schema, table = source.split(".")
        resources.append(
            sql_table(credentials=engine, schema=schema, table=table, backend=backend,
                      incremental=dlt.sources.incremental("updated_at"))
            .with_name(target.split(".")[1])
        )
    pipeline.run(resources, write_disposition="append")
    trace = pipeline.last_trace
    counts = trace.last_normalize_info.row_counts if trace and trace.last_normalize_info else {}
    names = {target.split(".")[1] for _, target in pairs}
    return sum(int(n) for table, n in counts.items() if table in names)


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] not in BACKENDS:
        print(__doc__, file=sys.stderr)
        return 2
    backend, uri, db, pairs_path, pipelines_dir = argv
    pairs = [(str(p[0]), str(p[1])) for p in json.loads(Path(pairs_path).read_text())]
    start = time.perf_counter()
    rows = run(backend, uri, db, pairs, pipelines_dir)
    json.dump({"rows": rows, "inproc_s": time.perf_counter() - start, "import_s": _IMPORT_S}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
