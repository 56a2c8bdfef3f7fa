"""Drift workload (issue 3): a 50,000-row source drifting before every run stays exactly equal in the target.

One source table `src__drift.events` (id INTEGER, qty INTEGER, price DOUBLE, code VARCHAR, name VARCHAR,
updated_at TIMESTAMP) replicated by pipeline `drift` into `stg__drift.events` of the same DuckDB file. An
initial run copies it; then five runs, each preceded by one drift applied to the source:

1. add a column (`tag VARCHAR`), insert 500 rows that fill it, update 250 existing rows (tag, updated_at);
2. widen `id` and `qty` INTEGER -> BIGINT, insert 500 rows with quantities past 2^31, update 250 rows;
3. non-widening type changes: `price` DOUBLE -> VARCHAR and `code` VARCHAR -> INTEGER, insert, update;
4. add rows only (5%: 2,500);
5. update rows' timestamps (10%: 5,000 rows; half of them change `name` too).

The pipeline is `strategy = "merge"` on `id`: steps 1-3 and 5 update existing rows, and an incremental
(append-only) replication would keep the old version of every updated row next to the new one by design
(CONTRACT section 3), so "target equals source" is only a meaningful promise for merge.
After every run (the initial one included) a child compares source and target exactly: same columns with
the same types, equal row counts, and `EXCEPT ALL` empty in both directions over every column.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from harness import PY, ROCKY, BenchError, _child, log, measure

BENCH_DIR = Path(__file__).resolve().parent
RUNNER = BENCH_DIR / "replication_runner.py"
SEP = "\n;\n"  # replication_runner.SEPARATOR
SOURCE, TARGET = "src__drift.events", "stg__drift.events"
PIPELINE = "drift"

ROCKY_TOML = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.drift]
type = "replication"
strategy = "{strategy}"
{keys}timestamp_column = "updated_at"

[pipeline.drift.source.schema_pattern]
prefix = "src"
separator = "__"
components = ["source"]

[pipeline.drift.target]
catalog_template = "wh"
schema_template = "stg__{{source}}"
"""


@dataclass(frozen=True)
class DriftStep:
    """SQL applied to the source before one run, and the drift actions Rocky should report for it."""

    name: str
    statements: tuple[str, ...]
    expected_actions: tuple[str, ...]


def _ts(run: int, id_expr: str = "id") -> str:
    """Timestamps of rows written before run `run`: later than everything written before (30 days apart)."""
    return f"TIMESTAMP '2026-01-01' + INTERVAL {30 * run} DAY + to_seconds({id_expr} % 86400)"


def _insert(run: int, start: int, count: int, columns: dict[str, str]) -> str:
    names = ", ".join(columns)
    values = ", ".join(v.replace("{ts}", _ts(run, "range")) for v in columns.values())
    return f"INSERT INTO {SOURCE} ({names}) SELECT {values} FROM range({start}, {start + count})"


def steps(rows: int) -> list[DriftStep]:
    """The five drifts, in order. Rows inserted by step k get ids after every earlier id."""
    base = {"id": "range", "qty": "(range % 1000)", "price": "(range % 9973) / 7.0",
            "code": "lpad(CAST(range % 100000 AS VARCHAR), 6, '0')", "name": "'name ' || range",
            "updated_at": "{ts}"}
    start = [rows, rows + 500, rows + 1000, rows + 1500]
    with_tag = {**base, "tag": "'tag ' || (range % 17)"}
    big_qty = {**with_tag, "qty": "3000000000 + range"}
    retyped = {**big_qty, "price": "CAST((range % 9973) / 7.0 AS VARCHAR)", "code": "(range % 100000)"}
    return [
        DriftStep(f"add column tag VARCHAR; +500 rows; {rows // 200} rows updated", (
            f"ALTER TABLE {SOURCE} ADD COLUMN tag VARCHAR",
            _insert(1, start[0], 500, with_tag),
            f"UPDATE {SOURCE} SET tag = 'updated', updated_at = {_ts(1)} WHERE id % 200 = 1 AND id < {rows}",
        ), ("add_column",)),
        DriftStep(f"widen id, qty INTEGER -> BIGINT; +500 rows (qty > 2^31); {rows // 200} rows updated", (
            f"ALTER TABLE {SOURCE} ALTER COLUMN id TYPE BIGINT",
            f"ALTER TABLE {SOURCE} ALTER COLUMN qty TYPE BIGINT",
            _insert(2, start[1], 500, big_qty),
            f"UPDATE {SOURCE} SET qty = qty + 4000000000, updated_at = {_ts(2)} "
            f"WHERE id % 200 = 2 AND id < {rows}",
        ), ("alter_column_type", "alter_column_type")),
        DriftStep(f"price DOUBLE -> VARCHAR, code VARCHAR -> INTEGER (not widening); +500 rows; "
                  f"{rows // 200} rows updated", (
            f"ALTER TABLE {SOURCE} ALTER COLUMN price TYPE VARCHAR",
            f"ALTER TABLE {SOURCE} ALTER COLUMN code TYPE INTEGER USING CAST(code AS INTEGER)",
            _insert(3, start[2], 500, retyped),
            f"UPDATE {SOURCE} SET price = 'n/a', updated_at = {_ts(3)} WHERE id % 200 = 3 AND id < {rows}",
        ), ("drop_and_recreate",)),
        DriftStep(f"add rows only: +{rows // 20:,}", (
            _insert(4, start[3], rows // 20, retyped),
        ), ()),
        DriftStep(f"update rows' timestamps: {rows // 10:,} rows (half also change name)", (
            f"UPDATE {SOURCE} SET updated_at = {_ts(5)}, name = CASE WHEN id % 20 = 0 THEN 'renamed ' || id "
            f"ELSE name END WHERE id % 10 = 0 AND id < {rows}",
        ), ()),
    ]


def seed_sql(rows: int) -> list[str]:
    return [
        "CREATE SCHEMA src__drift",
        f"CREATE TABLE {SOURCE} AS SELECT range::INTEGER AS id, (range % 1000)::INTEGER AS qty, "
        "(range % 9973) / 7.0 AS price, lpad(CAST(range % 100000 AS VARCHAR), 6, '0') AS code, "
        f"'name ' || range AS name, TIMESTAMP '2026-01-01' + to_seconds(range * 10) AS updated_at "
        f"FROM range({rows})",
        "CHECKPOINT",
    ]


@dataclass(frozen=True)
class DriftRun:
    """One rocky run of the drift scenario and the equality check after it."""

    run: int
    drift: str
    wall_s: float
    maxrss_kib: int
    duration_ms: int
    status: str
    rows_copied: int
    actions: list[str]
    expected_actions: list[str]
    source_rows: int
    target_rows: int
    missing: int | None
    extra: int | None
    types_equal: bool
    equal: bool


@dataclass
class DriftResult:
    rows: int
    strategy: str
    runs: list[DriftRun] = field(default_factory=list)


def generate(out_dir: Path, rows: int = 50_000, strategy: str = "merge") -> list[DriftStep]:
    """Write the project under `out_dir` (replacing it): rocky/rocky.toml, seed.sql, drift_<k>.sql."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    (out_dir / "rocky").mkdir(parents=True)
    keys = 'merge_keys = ["id"]\n' if strategy == "merge" else ""
    (out_dir / "rocky" / "rocky.toml").write_text(ROCKY_TOML.format(strategy=strategy, keys=keys))
    (out_dir / "seed.sql").write_text(SEP.join(seed_sql(rows)) + "\n")
    (out_dir / "pairs.json").write_text(json.dumps([[SOURCE, TARGET]]))
    plan = steps(rows)
    for k, step in enumerate(plan, start=1):
        (out_dir / f"drift_{k}.sql").write_text(SEP.join([*step.statements, "CHECKPOINT"]) + "\n")
    return plan


def _rocky_run(rocky_dir: Path, run: int, logs: Path) -> tuple[float, int, dict[str, object]]:
    out, err = logs / f"rocky-run{run}.out", logs / f"rocky-run{run}.err"
    argv = [str(ROCKY), "-c", str(rocky_dir / "rocky.toml"), "run", "--pipeline", PIPELINE,
            "--output", "json"]
    sample = measure(argv, cwd=rocky_dir, stdout=out, stderr=err, config="rocky", rnd=run)
    try:
        doc: dict[str, object] = json.loads(out.read_text(errors="replace"))
    except ValueError as exc:
        raise BenchError(f"drift run {run}: rocky exited {sample.returncode} without a JSON document: "
                         f"{err.read_text(errors='replace')[-3000:]}") from exc
    return sample.wall_s, sample.maxrss_kib, doc


def run_drift(work_dir: Path, rows: int = 50_000, strategy: str = "merge") -> DriftResult:
    """The initial copy, then five drift + run + exact comparison cycles; a run that fails is recorded."""
    root = work_dir / "drift"
    plan = generate(root, rows, strategy)
    rocky_dir, db = root / "rocky", root / "rocky" / "wh.duckdb"
    logs = root / "logs"
    logs.mkdir()
    runner = [str(PY), str(RUNNER)]
    _child([*runner, "exec", str(db), str(root / "seed.sql")], "seeding the drift source")
    result = DriftResult(rows, strategy)
    log(f"drift: {rows} rows, strategy {strategy}, {len(plan)} drifting runs")
    for run in range(len(plan) + 1):
        step = plan[run - 1] if run else DriftStep("initial copy (no drift)", (), ())
        if run:
            _child([*runner, "exec", str(db), str(root / f"drift_{run}.sql")], f"applying drift {run}")
        wall, rss, doc = _rocky_run(rocky_dir, run, logs)
        drift = doc.get("drift")
        taken = drift.get("actions_taken", []) if isinstance(drift, dict) else []
        mats = doc.get("materializations")
        rows_copied = sum(int(m.get("rows_copied") or 0) for m in mats) if isinstance(mats, list) else 0
        report = json.loads(_child([*runner, "compare", str(db), str(root / "pairs.json")],
                                   f"comparing after drift run {run}"))[0]
        status = str(doc.get("status"))
        entry = DriftRun(
            run=run, drift=step.name, wall_s=wall, maxrss_kib=rss,
            duration_ms=int(str(doc.get("duration_ms", 0))),
            status=status, rows_copied=rows_copied, actions=[str(a["action"]) for a in taken],
            expected_actions=list(step.expected_actions), source_rows=int(report["source_rows"]),
            target_rows=int(report["target_rows"]), missing=report["missing"], extra=report["extra"],
            types_equal=bool(report["types_equal"]), equal=bool(report["equal"]) and status == "Success",
        )
        result.runs.append(entry)
        if not report["types_equal"]:
            log(f"drift run {run}: types differ: source {report['source_types']} "
                f"target {report['target_types']}")
        log(f"drift run {run} ({step.name}): {wall:.2f}s, status {status}, {rows_copied} rows copied, "
            f"actions {entry.actions}, {'PASS' if entry.equal else 'FAIL'}")
    return result
