"""Replication workload (issue 3): 200 tables of 10,000 rows, then an incremental pass over 1% new rows.

Budget: Rocky's incremental second pass takes at most 1.3x the hand-written SQL run directly through DuckDB.

Layout written under `out_dir`:

    seed.sql      20 schemas `src__sNN` x 10 tables `tNN`, 10,000 rows each (id, customer_id, amount,
                  status, note, updated_at), arithmetic on range() so identical every time
    append.sql    100 new rows (1%) per table, every `updated_at` later than any existing one
    first.sql     the hand-written first pass: CREATE SCHEMA stg__sNN; CREATE TABLE ... AS SELECT * ...
    second.sql    the hand-written second pass: INSERT INTO target SELECT * FROM source
                  WHERE updated_at > (SELECT max(updated_at) FROM target), per table
    pairs.json    [[source, target], ...] for verification
    rocky/rocky.toml  DuckDB adapter `wh.duckdb` + replication pipeline `bench` (src__{source} into
                  stg__{source} of the same file, incremental on updated_at)

Method per round (rounds interleaved, raw-sql first): copy the seeded file fresh, drop Rocky's state, run
the first pass (timed, informational), append the 1% (untimed child), time the second pass as a whole
process, then verify every target table against its source (row count and id set).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from harness import PY, ROCKY, BenchError, _child, _fresh_db, log, measure

BENCH_DIR = Path(__file__).resolve().parent
RUNNER = BENCH_DIR / "replication_runner.py"
SEP = "\n;\n"  # replication_runner.SEPARATOR
DB_FILE = "wh.duckdb"  # catalog `wh`
PIPELINE = "bench"
CONFIGS = ("raw-sql", "raw-sql-2", "rocky")
BASE_TS = "TIMESTAMP '2026-01-01'"

ROCKY_TOML = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.bench]
type = "replication"
strategy = "incremental"
timestamp_column = "updated_at"

[pipeline.bench.source.schema_pattern]
prefix = "src"
separator = "__"
components = ["source"]

[pipeline.bench.target]
catalog_template = "wh"
schema_template = "stg__{source}"
"""


@dataclass(frozen=True)
class ReplicationProject:
    root: Path
    schemas: int
    tables_per_schema: int
    rows: int
    new_rows: int
    pairs: tuple[tuple[str, str], ...]

    @property
    def rocky_dir(self) -> Path:
        return self.root / "rocky"

    @property
    def raw_dir(self) -> Path:
        return self.root / "raw"

    def sql(self, name: str) -> Path:
        return self.root / f"{name}.sql"


def _rows_select(table_no: int, start: int, stop: int) -> str:
    """Deterministic rows `start..stop`; `updated_at` grows with id, so appended rows are the newest."""
    return (
        f"SELECT range::BIGINT AS id, ((range * 7 + {table_no}) % 5000)::INTEGER AS customer_id, "
        f"((range * 13 + {table_no}) % 100000 / 100.0)::DECIMAL(12,2) AS amount, "
        "(['new', 'paid', 'shipped', 'returned'])[1 + range % 4] AS status, "
        f"'note ' || range || ' of t{table_no}' AS note, "
        f"{BASE_TS} + to_seconds(range * 10) AS updated_at FROM range({start}, {stop})"
    )


def generate(out_dir: Path, schemas: int = 20, tables_per_schema: int = 10, rows: int = 10_000,
             new_pct: float = 1.0) -> ReplicationProject:
    """Write the seed, append, hand-written SQL and the Rocky project (replacing `out_dir`)."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    (out_dir / "rocky").mkdir(parents=True)
    (out_dir / "raw").mkdir()
    new_rows = max(1, round(rows * new_pct / 100))
    seed, append, first, second = [], [], [], []
    pairs: list[tuple[str, str]] = []
    for s in range(schemas):
        src_schema, tgt_schema = f"src__s{s:02d}", f"stg__s{s:02d}"
        seed.append(f"CREATE SCHEMA {src_schema}")
        first.append(f"CREATE SCHEMA {tgt_schema}")
        for t in range(tables_per_schema):
            no = s * tables_per_schema + t
            src, tgt = f"{src_schema}.t{t:02d}", f"{tgt_schema}.t{t:02d}"
            pairs.append((src, tgt))
            seed.append(f"CREATE TABLE {src} AS {_rows_select(no, 0, rows)}")
            append.append(f"INSERT INTO {src} {_rows_select(no, rows, rows + new_rows)}")
            first.append(f"CREATE TABLE {tgt} AS SELECT * FROM {src}")
            second.append(f"INSERT INTO {tgt} SELECT * FROM {src} "
                          f"WHERE updated_at > (SELECT max(updated_at) FROM {tgt})")
    seed.append("CHECKPOINT")
    append.append("CHECKPOINT")
    for name, stmts in (("seed", seed), ("append", append), ("first", first), ("second", second)):
        (out_dir / f"{name}.sql").write_text(SEP.join(stmts) + "\n")
    (out_dir / "pairs.json").write_text(json.dumps(pairs))
    (out_dir / "rocky" / "rocky.toml").write_text(ROCKY_TOML)
    return ReplicationProject(out_dir, schemas, tables_per_schema, rows, new_rows, tuple(pairs))


@dataclass(frozen=True)
class PassSample:
    """One timed pass (a whole child process)."""

    config: str
    phase: str  # "first" | "second"
    round: int
    wall_s: float
    maxrss_kib: int
    returncode: int
    #: raw configurations: connect-to-close time inside the child; rocky: the run's own duration_ms
    inproc_s: float | None = None
    #: raw configurations: duckdb + stdlib import time inside the child
    import_s: float | None = None
    rows_copied: int | None = None


@dataclass
class ReplicationResult:
    """All passes of the replication workload."""

    schemas: int
    tables_per_schema: int
    rows: int
    new_rows: int
    rounds: int
    samples: list[PassSample] = field(default_factory=list)
    tables_verified: int = 0
    verifications: int = 0

    @property
    def tables(self) -> int:
        return self.schemas * self.tables_per_schema


def _runner(mode: str, db: Path, path: Path) -> list[str]:
    return [str(PY), str(RUNNER), mode, str(db), str(path)]


def _timed_raw(project: ReplicationProject, config: str, phase: str, rnd: int, logs: Path) -> PassSample:
    db = project.raw_dir / DB_FILE
    mode = "exec" if config == "raw-sql" else "two"
    out, err = logs / f"{config}-{phase}-r{rnd}.out", logs / f"{config}-{phase}-r{rnd}.err"
    sample = measure(_runner(mode, db, project.sql(phase)), cwd=project.raw_dir, stdout=out, stderr=err,
                     config=config, rnd=rnd)
    if sample.returncode != 0:
        raise BenchError(f"{config} {phase} pass round {rnd} exited {sample.returncode}: "
                         f"{err.read_text(errors='replace')[-3000:]}")
    doc = json.loads(out.read_text())
    return PassSample(config, phase, rnd, sample.wall_s, sample.maxrss_kib, 0, float(doc["sql_s"]),
                      float(doc["import_s"]))


def _timed_rocky(project: ReplicationProject, phase: str, rnd: int, logs: Path) -> PassSample:
    out, err = logs / f"rocky-{phase}-r{rnd}.out", logs / f"rocky-{phase}-r{rnd}.err"
    argv = [str(ROCKY), "-c", str(project.rocky_dir / "rocky.toml"), "run", "--pipeline", PIPELINE,
            "--output", "json"]
    sample = measure(argv, cwd=project.rocky_dir, stdout=out, stderr=err, config="rocky", rnd=rnd)
    text = out.read_text(errors="replace")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise BenchError(f"rocky {phase} pass round {rnd} (exit {sample.returncode}) printed no JSON: "
                         f"{err.read_text(errors='replace')[-3000:]}") from exc
    if sample.returncode != 0 or doc.get("status") != "Success":
        errors = json.dumps(doc.get("errors", []))[:2000]
        raise BenchError(f"rocky {phase} pass round {rnd}: exit {sample.returncode}, status "
                         f"{doc.get('status')!r}, errors {errors} (see {out})")
    if doc.get("tables_copied") != project.schemas * project.tables_per_schema:
        raise BenchError(f"rocky {phase} pass round {rnd} copied {doc.get('tables_copied')} tables, expected "
                         f"{project.schemas * project.tables_per_schema} (see {out})")
    rows = sum(int(m.get("rows_copied") or 0) for m in doc.get("materializations", []))
    return PassSample("rocky", phase, rnd, sample.wall_s, sample.maxrss_kib, 0,
                      float(doc["duration_ms"]) / 1000, None, rows)


def _drop_state(rocky_dir: Path) -> None:
    """No models directory: the state store is `<config dir>/.rocky-state.db` (plus any sidecar files)."""
    for p in [*rocky_dir.glob(".rocky-state*"), rocky_dir / ".rocky"]:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)


def _verify(project: ReplicationProject, db: Path, what: str) -> int:
    doc = json.loads(_child(_runner("verify", db, project.root / "pairs.json"), f"verifying {what}"))
    if doc["mismatches"]:
        bad = doc["mismatches"]
        raise BenchError(f"{what}: {len(bad)} of {doc['tables']} target tables differ from their source, "
                         f"e.g. {bad[:3]}")
    return int(doc["tables"])


def run_replication(rounds: int, work_dir: Path, configs: tuple[str, ...] = CONFIGS, *, schemas: int = 20,
                    tables_per_schema: int = 10, rows: int = 10_000) -> ReplicationResult:
    """Generate, seed once, then interleave `rounds` rounds of first pass / append / timed second pass."""
    project = generate(work_dir / "replication", schemas, tables_per_schema, rows)
    result = ReplicationResult(project.schemas, project.tables_per_schema, project.rows, project.new_rows,
                               rounds)
    log(f"replication: {len(project.pairs)} tables x {project.rows} rows, +{project.new_rows} rows each")
    seeded = project.root / "seeded.duckdb"
    _child(_runner("exec", seeded, project.sql("seed")), "seeding the replication sources")
    logs = project.root / "logs"
    logs.mkdir()
    for rnd in range(rounds):
        for config in configs:
            work = project.rocky_dir if config == "rocky" else project.raw_dir
            db = work / DB_FILE
            _fresh_db(seeded, db)
            if config == "rocky":
                _drop_state(project.rocky_dir)
            for phase in ("first", "second"):
                if phase == "second":
                    _child(_runner("exec", db, project.sql("append")), f"appending new rows for {config}")
                sample = (_timed_rocky(project, phase, rnd, logs) if config == "rocky"
                          else _timed_raw(project, config, phase, rnd, logs))
                result.samples.append(sample)
                result.tables_verified = _verify(project, db, f"{config} round {rnd} after the {phase} pass")
                result.verifications += 1
                log(f"replication round {rnd + 1}/{rounds} {config} {phase}: {sample.wall_s:.2f}s "
                    f"(in-process {sample.inproc_s or 0:.2f}s) {sample.maxrss_kib / 1024:.0f}MB")
            if config == "rocky":
                expected = len(project.pairs) * project.new_rows
                if result.samples[-1].rows_copied != expected:
                    raise BenchError(f"rocky second pass round {rnd} copied {result.samples[-1].rows_copied} "
                                     f"rows, expected {expected}")
            db.unlink(missing_ok=True)
    return result
