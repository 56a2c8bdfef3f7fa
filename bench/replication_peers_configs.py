"""The configurations of the replication-peers workload: what each one runs for a pass, and where it lands.

Every configuration copies the same PostgreSQL tables into its own, initially empty DuckDB file
(`<work>/<variant>/<config>/wh.duckdb`) as a child process of its own; `command` returns that child's argv
and environment for one pass. Three kinds:

- `rocky`: `rocky run`, from rocky's bench venv (`.venv-bench-rocky`: this tree installed as a user
  installs it, `pip install .[postgres]`, see setup_peers.sh), of a replication pipeline written the way a
  user writes it (a postgres source adapter with `password = "${PGPASSWORD}"`, a duckdb target adapter,
  schema pattern `src__{source}`, `strategy = "incremental"` on `updated_at`), targets
  `stg__<source>.<table>`; `rocky-p2` the same with `parallel_reads = 2` in `[source]` (two concurrent
  COPY range streams on `updated_at`);
- peers: dlt (connectorx and pyarrow backends) and Sling, each configured as its documentation shows, targets
  `stg_<variant>.<name>`;
- direct paths (`replication_peers_direct.py`): one reader, one CREATE TABLE AS / INSERT, no framework.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness import BENCH_DIR, BENCH_VENV, ROOT, child_env
from replication_peers_pg import Source, SourceServer

DUCKDB15_VENV = Path(os.environ.get("BENCH_DUCKDB15_VENV", ROOT / ".venv-bench-duckdb15"))
_SITE = "lib/python3.11/site-packages"
SLING_BIN = BENCH_VENV / _SITE / "sling_linux_amd64" / "bin" / "sling-linux-amd64"
DUCKDB_CLI = DUCKDB15_VENV / _SITE / "duckdb_cli" / "duckdb"
DB_FILE = "wh.duckdb"
#: rocky as a user installs it (setup_peers.sh): the dev venv's dagster, pyspark and pandas are not there,
#: so pyarrow loads no numpy (~0.3 s of CPU on an incremental pass of ~1 s)
ROCKY_VENV = Path(os.environ.get("BENCH_ROCKY_VENV", ROOT / ".venv-bench-rocky"))
ROCKY = ROCKY_VENV / "bin" / "rocky"
#: the libraries a rocky replication from PostgreSQL into DuckDB cannot run without (DESIGN.md's chosen
#: ones): importing them alone, in rocky's venv, is the floor of any rocky pass
ROCKY_LIBRARIES = ("duckdb", "pyarrow", "psycopg", "pydantic")


@dataclass(frozen=True)
class Config:
    name: str
    kind: str  # "rocky" | "peer" | "direct"
    label: str  # the row label of the report table

    def target(self, source_table: str) -> str:
        """Where this configuration lands `schema.table` of the source."""
        schema, table = source_table.split(".")
        part = schema.split("__", 1)[1]
        if self.kind == "rocky":
            return f"stg__{part}.{table}"
        variant = "big" if part == "big" else "small"
        return f"stg_{variant}.{table}" if variant == "big" else f"stg_small.{part}_{table}"


CONFIGS = {c.name: c for c in (
    Config("rocky", "rocky", "**rocky** (replication pipeline, postgres source, duckdb target)"),
    Config("rocky-p2", "rocky", "rocky with `parallel_reads = 2` (two COPY range streams on `updated_at`)"),
    Config("dlt-connectorx", "peer", "dlt 1.31 (`sql_table`, connectorx backend)"),
    Config("dlt-pyarrow", "peer", "dlt 1.31 (`sql_table`, pyarrow backend)"),
    Config("sling", "peer", "Sling 1.4.11 (DuckDB target through the duckdb 1.5.5 CLI)"),
    Config("cx", "direct", "connectorx to Arrow (one table), CTAS"),
    Config("cx-stream", "direct", "connectorx `arrow_stream` (100k-row batches), CTAS"),
    Config("cx-p2", "direct", "connectorx, `partition_on` id, 2 partitions, CTAS"),
    Config("cx-p4", "direct", "connectorx, `partition_on` id, 4 partitions, CTAS"),
    Config("adbc", "direct", "ADBC PostgreSQL driver, batch stream, CTAS"),
    Config("adbc-p2", "direct", "ADBC, 2 concurrent COPY streams on id halves, one CTAS"),
    Config("pgscan", "direct", "DuckDB postgres extension (duckdb 1.5.5) CTAS"),
    Config("copy-csv", "direct", "psycopg COPY (CSV) parsed by pyarrow, CTAS"),
)}
#: the default configurations of each variant (the 200-table one leaves out the readers that differ only
#: on a large table: partitions, streams)
DEFAULT = {
    "big": tuple(CONFIGS),
    "small": ("rocky", "dlt-connectorx", "dlt-pyarrow", "sling", "cx", "adbc", "pgscan", "copy-csv"),
}
#: direct modes run by the DuckDB 1.5.5 venv (the postgres extension) or the project's venv (psycopg)
_DIRECT_PYTHON = {"pgscan": DUCKDB15_VENV / "bin" / "python", "copy-csv": ROOT / ".venv" / "bin" / "python"}

#: `[pipeline.NAME.source]` lines of a rocky variant (rocky-p2: the parallel range reads of phase 2, which
#: `auto` leaves off on fewer than 4 cores; measured to say whether they pay on this machine)
_ROCKY_SOURCE_EXTRA = {"rocky-p2": "parallel_reads = 2\n"}

ROCKY_TOML = """\
[adapter.source]
type = "postgres"
host = "{host}"
port = {port}
user = "{user}"
password = "${{PGPASSWORD}}"
dbname = "{dbname}"

[adapter.warehouse]
type = "duckdb"
path = "{db}"

[pipeline.{pipeline}]
type = "replication"
strategy = "incremental"
timestamp_column = "updated_at"

[pipeline.{pipeline}.source]
adapter = "source"
{source_extra}
[pipeline.{pipeline}.source.schema_pattern]
prefix = "src"
separator = "__"
components = ["source"]

[pipeline.{pipeline}.target]
adapter = "warehouse"
catalog_template = "wh"
schema_template = "stg__{{source}}"
"""


def select_list() -> str:
    """The direct paths' SELECT: every column cast to the DuckDB type rocky creates for it."""
    casts = {"id": "BIGINT", "qty": "INTEGER", "amount": "DECIMAL(12,2)", "score": "DOUBLE",
             "name": "VARCHAR", "code": "VARCHAR", "active": "BOOLEAN", "day": "DATE",
             "updated_at": "TIMESTAMPTZ", "note": "VARCHAR"}
    return ", ".join(f"CAST({c} AS {t}) AS {c}" for c, t in casts.items())


@dataclass(frozen=True)
class Pass:
    argv: list[str]
    env: dict[str, str]
    cwd: Path


def write_project(config: Config, source: Source, server: SourceServer, pipeline: str, work: Path) -> None:
    """The files a configuration reads (written once per variant; the harness never deletes them)."""
    import json

    work.mkdir(parents=True, exist_ok=True)
    pairs = [[t, config.target(t), select_list()] for t in source.tables]
    (work / "pairs.json").write_text(json.dumps(pairs))
    if config.kind == "rocky":
        s = server.server
        extra = _ROCKY_SOURCE_EXTRA.get(config.name, "")
        (work / "rocky.toml").write_text(ROCKY_TOML.format(host=s.host, port=s.port, user=s.user,
                                                           dbname=source.dbname, db=DB_FILE,
                                                           pipeline=pipeline, source_extra=extra))
    elif config.name == "sling":
        streams = "".join(f"  {t}:\n    object: {config.target(t)}\n" for t in source.tables)
        (work / "replication.yaml").write_text(
            "source: SRC\ntarget: WH\ndefaults:\n  mode: incremental\n  update_key: updated_at\n"
            f"streams:\n{streams}")


def command(config: Config, source: Source, server: SourceServer, pipeline: str, phase: str,
            work: Path) -> Pass:
    env = child_env()
    uri = server.uri(source.dbname)
    db = str(work / DB_FILE)
    if config.kind == "rocky":
        env["PGPASSWORD"] = server.password
        argv = [str(ROCKY), "-c", str(work / "rocky.toml"), "run", "--pipeline", pipeline, "--output", "json"]
    elif config.name.startswith("dlt-"):
        argv = [str(BENCH_VENV / "bin" / "python"), str(BENCH_DIR / "replication_peers_dlt.py"),
                config.name.removeprefix("dlt-"), uri, db, str(work / "pairs.json"), str(work / "dlt")]
    elif config.name == "sling":
        # HOME: where the duckdb CLI finds the json/httpfs extensions Sling INSTALLs (setup_peers.sh)
        env.update(SRC=f"{uri}?sslmode=disable", WH=f"duckdb://{db}", DUCKDB_PATH=str(DUCKDB_CLI),
                   HOME=str(DUCKDB15_VENV / "sling-home"), SLING_HOME_DIR=str(work / "sling"),
                   SLING_DISABLE_TELEMETRY="true", SLING_LOGGING_COLOR="false")
        argv = [str(SLING_BIN), "run", "-r", str(work / "replication.yaml")]
    else:
        python = _DIRECT_PYTHON.get(config.name, BENCH_VENV / "bin" / "python")
        argv = [str(python), str(BENCH_DIR / "replication_peers_direct.py"), config.name, phase, uri, db,
                str(work / "pairs.json")]
    return Pass(argv, env, work)


def missing_tools(names: set[str]) -> list[str]:
    """The installed programs the named configurations need that are not there."""
    need = {ROCKY} if names & {"rocky", "rocky-p2"} else set()
    if names & {"dlt-connectorx", "dlt-pyarrow", "cx", "cx-stream", "cx-p2", "cx-p4", "adbc", "adbc-p2"}:
        need.add(BENCH_VENV / "bin" / "python")
    if "sling" in names:
        need |= {SLING_BIN, DUCKDB_CLI, DUCKDB15_VENV / "sling-home"}
    if "pgscan" in names:
        need |= {DUCKDB15_VENV / "bin" / "python", DUCKDB15_VENV / "postgres_scanner.duckdb_extension"}
    return sorted(str(p) for p in need if not p.exists())


def fresh(work: Path) -> None:
    """An empty target: no DuckDB file, no rocky state, no dlt pipeline state, no Sling home."""
    import shutil

    for path in [work / DB_FILE, work / f"{DB_FILE}.wal", *work.glob(".rocky-state*")]:
        path.unlink(missing_ok=True)
    for name in ("dlt", "sling", ".rocky"):
        shutil.rmtree(work / name, ignore_errors=True)
