"""Rocky on Spark: a generated 100-model project on a local Spark Connect server, against its own statements
run directly through one Spark Connect session with two in flight (issue 19 budget: at most 1.15x).

The server is the test suite's (`tests/fixtures/spark_server.py`: the Connect server inside the pyspark
wheel, `local[2]`, 2 GB driver, the AppCDS archive when present), started once for the whole measurement
and stopped at the end. Without Java or pyspark the script writes a section that says so and exits 0.

The project (generated here, not by `generate.py`, whose SQL is DuckDB's): raw tables seeded on the server
in `bench_src` (orders 100,000 rows, customers 5,000), then `--models` full-refresh models in layers, each
a GROUP BY over a raw table or a join of two earlier models; every model has the same three columns.

Each round, interleaved: both target schemas are dropped and created (untimed), then
- rocky: a whole `rocky run --pipeline bench` process (`[execution] concurrency = 2`), spawn to reap;
- direct: a whole `spark_bench.py direct` process, spawn to reap, which opens one pyspark Connect session
  and runs the same statements rocky runs for a model into a fresh schema (`CREATE TABLE <schema>.<model>
  AS <body>`), two in flight, each as soon as its parents are built.
Both children import pyspark and connect, so the ratio is rocky's own overhead on top of the statements.
Checked after the last round: every model has the same row count in both schemas. Then, interleaved, the
two ways replication lands rows in Spark (`--ingest-rows`, 1,000,000 by default): the Arrow upload and
staged Parquet, each a child that times only the landing and one CTAS (information figures).

    .venv/bin/python bench/spark_bench.py [--rounds 3] [--models 100] [--work-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
from harness import BENCH_DIR, PY, ROCKY, child_env, measure  # noqa: E402
from suites import SuiteResult, figure, write  # noqa: E402

BUDGET_X = 1.15
SOURCE_SCHEMA = "bench_src"
ROCKY_SCHEMA = "bench_rocky"
DIRECT_SCHEMA = "bench_direct"
ORDERS = 100_000
CUSTOMERS = 5_000
#: models per layer of the generated DAG
LAYER = 10
IN_FLIGHT = 2

SEED = [
    f"CREATE DATABASE IF NOT EXISTS {SOURCE_SCHEMA}",
    f"DROP TABLE IF EXISTS {SOURCE_SCHEMA}.raw_orders",
    f"DROP TABLE IF EXISTS {SOURCE_SCHEMA}.raw_customers",
    f"CREATE TABLE {SOURCE_SCHEMA}.raw_orders USING parquet AS SELECT id AS order_id, "
    f"id % {CUSTOMERS} AS customer_id, CAST(id % 997 AS DECIMAL(12,2)) / 10 AS amount, "
    f"CAST(id % 5 AS INT) AS status FROM range({ORDERS})",
    f"CREATE TABLE {SOURCE_SCHEMA}.raw_customers USING parquet AS SELECT id AS customer_id, "
    f"CAST(id % 7 AS INT) AS region FROM range({CUSTOMERS})",
]


@dataclass(frozen=True)
class Model:
    name: str
    parents: tuple[str, ...]
    #: the SELECT with `@@name@@` where a model is referenced
    body: str

    def sql(self, schema: str | None) -> str:
        """The body with model references bare (rocky resolves them) or qualified by ``schema``."""
        out = self.body
        for parent in self.parents:
            out = out.replace(f"@@{parent}@@", f"{schema}.{parent}" if schema else parent)
        return out


def models(n: int) -> list[Model]:
    """A layered DAG: layer 0 aggregates the raw tables, every later model joins two of the layer above."""
    out: list[Model] = []
    for i in range(n):
        name = f"m{i:04d}"
        layer = i // LAYER
        if layer == 0:
            raw = "raw_orders" if i % 2 == 0 else "raw_customers"
            if raw == "raw_orders":
                body = (f"SELECT customer_id, count(*) AS n, sum(amount) AS total "
                        f"FROM {SOURCE_SCHEMA}.raw_orders WHERE status <> {i % 5} GROUP BY customer_id")
            else:
                body = (f"SELECT customer_id, CAST(region AS BIGINT) AS n, "
                        f"CAST(region AS DECIMAL(22,2)) AS total FROM {SOURCE_SCHEMA}.raw_customers "
                        f"WHERE region <> {i % 7}")
            out.append(Model(name, (), body))
            continue
        above = [m.name for m in out[(layer - 1) * LAYER : layer * LAYER]]
        a, b = above[i % len(above)], above[(i * 3 + 1) % len(above)]
        parents = (a,) if a == b else (a, b)
        other = f"@@{b}@@" if a != b else f"@@{a}@@"
        body = (f"SELECT x.customer_id, x.n + coalesce(y.n, 0) AS n, x.total AS total FROM @@{a}@@ x "
                f"LEFT JOIN {other} y ON x.customer_id = y.customer_id WHERE x.n % {2 + i % 3} <> 1")
        out.append(Model(name, parents, body))
    return out


def write_project(root: Path, remote: str, dag: list[Model]) -> Path:
    """The rocky project (one transformation pipeline ``bench`` over the Spark adapter) and plan.json."""
    rocky_dir = root / "rocky"
    shutil.rmtree(rocky_dir, ignore_errors=True)
    (rocky_dir / "models").mkdir(parents=True)
    (rocky_dir / "rocky.toml").write_text(
        f'[adapter]\ntype = "spark"\nremote = "{remote}"\n\n'
        '[pipeline.bench]\ntype = "transformation"\nmodels = "models/**"\n\n'
        f"[pipeline.bench.execution]\nconcurrency = {IN_FLIGHT}\n"
    )
    (rocky_dir / "models" / "_defaults.toml").write_text(f'[target]\nschema = "{ROCKY_SCHEMA}"\n')
    for model in dag:
        (rocky_dir / "models" / f"{model.name}.sql").write_text(model.sql(None) + "\n")
    plan = [{"name": m.name, "parents": list(m.parents), "sql": statement(m)} for m in dag]
    (root / "plan.json").write_text(json.dumps(plan))
    return rocky_dir


def statement(model: Model) -> str:
    """What rocky runs for a full-refresh model whose table does not exist yet."""
    return f"CREATE TABLE {DIRECT_SCHEMA}.{model.name} AS {model.sql(DIRECT_SCHEMA)}"


# --------------------------------------------------------------------------- the direct child


def run_direct(remote: str, plan_file: Path) -> int:
    """Run plan.json's statements through ONE pyspark session, two in flight, each once its parents are
    done."""
    from tests.fixtures.spark_server import remote_session

    plan: list[dict[str, Any]] = json.loads(plan_file.read_text())
    spark = remote_session(remote)
    try:
        done: set[str] = set()
        pending = {p["name"]: p for p in plan}
        lock = threading.Lock()
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            running: dict[Future[None], str] = {}

            def submit_ready() -> None:
                for name, item in list(pending.items()):
                    if len(running) >= IN_FLIGHT:
                        return
                    if all(p in done for p in item["parents"]):
                        del pending[name]
                        running[pool.submit(spark.sql, item["sql"])] = name  # type: ignore[arg-type]

            submit_ready()
            while running:
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in finished:
                    future.result()
                    with lock:
                        done.add(running.pop(future))
                submit_ready()
    finally:
        spark.stop()
    return 0


def run_ingest(remote: str, mode: str, rows: int, staging: Path) -> int:
    """Land ``rows`` DuckDB rows on Spark through rocky's copy seam (``arrow`` or ``parquet``) with one CTAS;
    print the seconds of the landing alone (connecting and importing excluded)."""
    import time

    import duckdb

    from rocky_engine.adapters.spark import ingest
    from rocky_engine.adapters.spark.connection import SparkConnection
    from rocky_engine.adapters.spark.options import SparkConnectOptions

    connection = SparkConnection.open(SparkConnectOptions(remote=remote, adapter="bench"))
    try:
        session = connection.session()
        session.execute(f"DROP TABLE IF EXISTS {SOURCE_SCHEMA}.ingest_{mode}")
        con = duckdb.connect()
        rel: Any = con.sql(
            "SELECT range AS id, 'name ' || range AS name, (range * 1.25)::DECIMAL(12,2) AS amount, "
            "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts, "
            "TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(range) AS tz, "
            f"CASE WHEN range % 7 = 0 THEN NULL ELSE range END AS maybe FROM range({rows})")
        reader = rel.to_arrow_reader(50_000) if hasattr(rel, "to_arrow_reader") else rel.record_batch(50_000)
        started = time.perf_counter()
        with ingest.scan_arrow(session, f"__bench_{mode}", [reader],
                               staging_dir=staging if mode == "parquet" else None) as relation:
            session.execute(
                f"CREATE TABLE {SOURCE_SCHEMA}.ingest_{mode} USING parquet AS SELECT * FROM {relation}")
        seconds = time.perf_counter() - started
        counted = session.query(f"SELECT count(*) FROM {SOURCE_SCHEMA}.ingest_{mode}")[0][0]
        if counted != rows:
            raise SystemExit(f"{mode}: {counted} rows landed of {rows}")
        session.execute(f"DROP TABLE {SOURCE_SCHEMA}.ingest_{mode}")
    finally:
        connection.close()
    print(json.dumps({"seconds": seconds}))
    return 0


# --------------------------------------------------------------------------- the measurement


def _sql(spark: Any, *statements: str) -> None:
    for sql in statements:
        spark.sql(sql)


def _counts(spark: Any, schema: str, dag: list[Model]) -> dict[str, int]:
    union = " UNION ALL ".join(
        f"SELECT '{m.name}' AS name, count(*) AS n FROM {schema}.{m.name}" for m in dag)
    return {str(r[0]): int(r[1]) for r in spark.sql(union).collect()}


def _ingest_rounds(remote: str, args: argparse.Namespace, work: Path) -> dict[str, list[float]]:
    """The two ways into Spark, interleaved, ``--rounds`` each: seconds of the landing itself."""
    staging = work / "staging"
    staging.mkdir(exist_ok=True)
    out: dict[str, list[float]] = {"arrow": [], "parquet": []}
    for rnd in range(args.rounds):
        for mode in out:
            argv = [str(PY), str(Path(__file__).resolve()), "ingest", remote, mode, str(args.ingest_rows),
                    str(staging)]
            sample = measure(argv, cwd=_ROOT, env=child_env(), stdout=work / "ingest.json",
                             stderr=work / "ingest.err", config=mode, rnd=rnd)
            if sample.returncode != 0:
                tail = (work / "ingest.err").read_text(errors="replace")[-2000:]
                raise SystemExit(f"the {mode} landing exited {sample.returncode}: {tail}")
            out[mode].append(float(json.loads((work / "ingest.json").read_text())["seconds"]))
            print(f"ingest round {rnd}: {mode} {out[mode][-1]:.2f} s", file=sys.stderr)
    return out


def _skip(args: argparse.Namespace, reason: str) -> int:
    result = SuiteResult("spark", "rocky on Spark vs direct Spark Connect statements (issue 19)",
                         "Not measured: the Spark Connect server cannot run on this machine.",
                         notes=[f"skipped: {reason}"])
    print(write(args.json, result))
    print(f"spark bench skipped: {reason}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    direct = sub.add_parser("direct", help="(child) run plan.json's statements directly")
    direct.add_argument("remote")
    direct.add_argument("plan", type=Path)
    landing = sub.add_parser("ingest", help="(child) land rows through the copy seam, timed")
    landing.add_argument("remote")
    landing.add_argument("mode", choices=("arrow", "parquet"))
    landing.add_argument("rows", type=int)
    landing.add_argument("staging", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--work-dir", type=Path, default=BENCH_DIR / "work" / "spark")
    parser.add_argument("--ingest-rows", type=int, default=1_000_000,
                        help="rows landed per copy-seam figure (0: skip them)")
    parser.add_argument("--json", type=Path, help="also write the figures here (run_bench reads them)")
    args = parser.parse_args(argv)
    if args.command == "direct":
        return run_direct(args.remote, args.plan)
    if args.command == "ingest":
        return run_ingest(args.remote, args.mode, args.rows, args.staging)

    from tests.fixtures.spark_server import SparkUnavailable, remote_session, start_server

    work = args.work_dir.resolve()
    shutil.rmtree(work / "server", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    try:
        server = start_server(work / "server")
    except SparkUnavailable as exc:
        return _skip(args, str(exc))
    try:
        dag = models(args.models)
        rocky_dir = write_project(work, server.url, dag)
        spark = remote_session(server.url)
        try:
            _sql(spark, *SEED)
            rocky_s, direct_s, rocky_cpu = [], [], []
            for rnd in range(args.rounds):
                for schema in (ROCKY_SCHEMA, DIRECT_SCHEMA):
                    _sql(spark, f"DROP DATABASE IF EXISTS {schema} CASCADE", f"CREATE DATABASE {schema}")
                env = child_env()
                r = measure([str(ROCKY), "run", "--pipeline", "bench", "--output", "json"], cwd=rocky_dir,
                            env=env, stdout=work / "rocky.json", stderr=work / "rocky.err", config="rocky",
                            rnd=rnd)
                if r.returncode != 0:
                    tail = (work / "rocky.err").read_text(errors="replace")[-2000:]
                    raise SystemExit(f"rocky run exited {r.returncode}: {tail}")
                direct_argv = [str(PY), str(Path(__file__).resolve()), "direct", server.url,
                               str(work / "plan.json")]
                d = measure(direct_argv, cwd=_ROOT, env=env, stderr=work / "direct.err", config="direct",
                            rnd=rnd)
                if d.returncode != 0:
                    tail = (work / "direct.err").read_text(errors="replace")[-2000:]
                    raise SystemExit(f"the direct runner exited {d.returncode}: {tail}")
                rocky_s.append(r.wall_s)
                rocky_cpu.append(r.cpu_s)
                direct_s.append(d.wall_s)
                print(f"round {rnd}: rocky {r.wall_s:.2f} s, direct {d.wall_s:.2f} s", file=sys.stderr)
            mine, theirs = _counts(spark, ROCKY_SCHEMA, dag), _counts(spark, DIRECT_SCHEMA, dag)
            landed = _ingest_rounds(server.url, args, work) if args.ingest_rows else {}
        finally:
            spark.stop()
    finally:
        server.stop()
        shutil.rmtree(work / "server", ignore_errors=True)
    if mine != theirs:
        wrong = sorted(k for k in theirs if mine.get(k) != theirs[k])[:5]
        raise SystemExit(f"row counts differ between rocky and the direct statements: {wrong}")
    ratios = [a / b for a, b in zip(rocky_s, direct_s, strict=True)]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    result = SuiteResult(
        "spark", "rocky on Spark vs direct Spark Connect statements (issue 19)",
        f"A generated {args.models}-model full-refresh project on a local Spark Connect server (`local[2]`); "
        "whole `rocky run` processes (concurrency 2) against whole processes that run the same CREATE TABLE "
        "... AS statements through one Spark Connect session with two in flight; rounds interleaved, each "
        "into freshly created schemas. Checked: the same row count in every model of both.",
        figures=[
            figure(f"rocky / direct, {args.models} models", ratios, "x", "<=", BUDGET_X,
                   f"load average at end {load}"),
            figure(f"rocky run: {args.models} models", rocky_s, "s"),
            figure(f"direct statements: {args.models} models", direct_s, "s"),
            figure("rocky run, CPU time of the rocky process (user + system)", rocky_cpu, "s"),
            *(figure(f"replication into Spark, {args.ingest_rows:,} rows: {label}", landed[mode], "s",
                     detail="DuckDB rows landed through the copy seam and written with one CTAS")
              for mode, label in (("arrow", "Arrow upload"), ("parquet", "staged Parquet"))
              if mode in landed),
        ],
    )
    print(write(args.json, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
