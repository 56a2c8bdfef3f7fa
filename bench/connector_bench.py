"""Child connector budgets (issue 8): the load path against DuckDB itself, and the framework's overhead.

1. Loading 10 Parquet files with 10 million rows in total through ``rocky load --connector``, against
   ``INSERT INTO target SELECT * FROM read_parquet([...])`` run directly in DuckDB on the same files.
   Both run as their own process on a fresh warehouse file whose (empty) target table exists already;
   the connector program hard-links the pre-generated files into its scratch directory, so its own work
   is nearly nothing and the figure is Rocky's path: claim, launch, result checks (footers), staging,
   drift, the INSERT, the state commit. Budget: at most 1.3x.
2. The framework's own overhead for an empty result: ``execute_connector_load`` in process with a
   ``/bin/sh`` program that writes an empty result, minus the time of that program run on its own.
   Budget: at most 0.3 s. The whole ``rocky load --connector`` process (interpreter start included) is
   reported beside it.

Every timed child runs with bytecode caching on (``harness.child_env``). ``make bench`` runs this as the
``connector`` workload of run_bench.

Usage: ``.venv/bin/python bench/connector_bench.py [--rounds 3] [--rows 10000000] [--work-dir DIR]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BENCH_DIR, PY, ROCKY, child_env
from suites import Figure, SuiteResult, figure, write

FILES = 10

ROCKY_TOML = """\
[adapter.default]
type = "duckdb"
path = "wh.duckdb"

[connector.bench]
manifest = "conn/connector.toml"
output_uri = "file://./landing"
target = { catalog = "wh", schema = "raw", table = "events" }
retries = 0
"""

MANIFEST = """\
protocol_version = 0
name = "bench"
command = {command}
state_schema_version = 1
egress_hosts = []
"""

LINK_PROGRAM = """\
import json, os, sys
request = json.load(sys.stdin)
out = request["output_dir"]
files = json.load(open(sys.argv[1]))
entries = []
for f in files:
    name = os.path.basename(f["path"])
    os.link(f["path"], os.path.join(out, name))
    entries.append({"path": name, "bytes": f["bytes"], "rows": f["rows"]})
json.dump({"protocol_version": 0, "files": entries, "state": {"schema_version": 1, "value": {"n": 1}}},
          open(os.path.join(out, "_rocky_result.json"), "w"))
"""

EMPTY_PROGRAM = """\
#!/bin/sh
cat > /dev/null
printf '{"protocol_version":0,"files":[],"state":{"schema_version":1,"value":{}}}' > _rocky_result.json
"""

BASELINE = """\
import sys, time, duckdb
db, files = sys.argv[1], sys.argv[2:]
con = duckdb.connect(db)
lst = "[" + ", ".join("'" + f + "'" for f in files) + "]"
con.execute(f"INSERT INTO raw.events SELECT * FROM read_parquet({lst})")
con.close()
"""


def generate(work: Path, rows: int) -> list[dict[str, object]]:
    import duckdb

    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    per = rows // FILES
    out = []
    con = duckdb.connect()
    for i in range(FILES):
        path = data / f"part-{i}.parquet"
        if not path.exists():
            con.execute(
                f"COPY (SELECT {i * per} + range AS id, 'customer_' || (range % 5000) AS customer, "
                "(range % 100000) / 100.0 AS amount, TIMESTAMP '2026-01-01' + INTERVAL (range) SECOND AS "
                f"created_at, range % 7 = 0 AS flagged FROM range({per})) TO '{path}' (FORMAT parquet)"
            )
        out.append({"path": str(path), "bytes": path.stat().st_size, "rows": per})
    con.close()
    return out


def fresh_warehouse(db: Path, sample: str) -> None:
    import duckdb

    for suffix in ("", ".wal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    con.execute("CREATE SCHEMA raw")
    con.execute(f"CREATE TABLE raw.events AS SELECT * FROM read_parquet('{sample}') LIMIT 0")
    con.close()


def rows_in(db: Path) -> int:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM raw.events").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, env=child_env())
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def connector_project(work: Path, command: list[str], program: tuple[str, str] | None) -> Path:
    proj = work / ("proj-" + ("load" if program and program[0] == "link.py" else "empty"))
    shutil.rmtree(proj, ignore_errors=True)
    (proj / "conn").mkdir(parents=True)
    if program is not None:
        path = proj / "conn" / program[0]
        path.write_text(program[1])
        path.chmod(0o755)
    (proj / "conn" / "connector.toml").write_text(MANIFEST.format(command=json.dumps(command)))
    (proj / "rocky.toml").write_text(ROCKY_TOML)
    return proj


def bench_load(work: Path, files: list[dict[str, object]], rounds: int) -> tuple[list[float], list[float]]:
    listing = work / "files.json"
    listing.write_text(json.dumps(files))
    program = f"#!{PY}\n{LINK_PROGRAM}"
    proj = connector_project(work, ["./link.py", str(listing)], ("link.py", program))
    paths = [str(f["path"]) for f in files]
    total = sum(int(str(f["rows"])) for f in files)
    direct, rocky = [], []
    for _ in range(rounds):
        db = work / "direct.duckdb"
        fresh_warehouse(db, paths[0])
        direct.append(timed([str(PY), "-c", BASELINE, str(db), *paths], work))
        assert rows_in(db) == total
        db = proj / "wh.duckdb"
        fresh_warehouse(db, paths[0])
        for leftover in (proj / ".rocky-state.db", proj / "landing"):
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink(missing_ok=True)
        rocky.append(timed([str(ROCKY), "-c", str(proj / "rocky.toml"),
                            "--output", "json", "load", "--connector", "bench"], proj))
        assert rows_in(db) == total
    return direct, rocky


def bench_empty(work: Path, rounds: int) -> tuple[list[float], list[float], list[float]]:
    from rocky_engine import logs
    from rocky_engine.connectors.connector_run import execute_connector_load
    from rocky_engine.project import load_project

    logs.configure(json_lines=False, level=40)
    proj = connector_project(work, ["./empty.sh"], ("empty.sh", EMPTY_PROGRAM))
    project = load_project(proj / "rocky.toml")
    execute_connector_load(project, "bench")  # warm imports once, as a long-lived caller would be
    in_process, program_alone, cli = [], [], []
    scratch = Path(tempfile.mkdtemp(prefix="rocky-bench-"))
    request = json.dumps({"protocol_version": 0, "output_dir": str(scratch), "state": None}).encode()
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = execute_connector_load(project, "bench")
        in_process.append(time.perf_counter() - t0)
        assert out.connector is not None and out.connector.status == "loaded"
        t0 = time.perf_counter()
        subprocess.run([str(proj / "conn" / "empty.sh")], input=request, cwd=scratch, check=True,
                       env={"PATH": os.environ.get("PATH", os.defpath)})
        program_alone.append(time.perf_counter() - t0)
        cli.append(timed([str(ROCKY), "-c", str(proj / "rocky.toml"),
                          "--output", "json", "load", "--connector", "bench"], proj))
    shutil.rmtree(scratch, ignore_errors=True)
    return in_process, program_alone, cli


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--work-dir", default=str(BENCH_DIR / "work" / "connector"))
    p.add_argument("--json", type=Path, help="also write the figures here (run_bench reads them)")
    args = p.parse_args(argv)
    work = Path(args.work_dir).resolve()  # children run in other directories
    work.mkdir(parents=True, exist_ok=True)
    files = generate(work, args.rows)
    direct, rocky = bench_load(work, files, args.rounds)
    empty_rounds = max(args.rounds, 5)
    in_process, alone, cli = bench_empty(work, empty_rounds)
    med = statistics.median
    ratio = med(rocky) / med(direct)
    total_bytes = sum(int(str(f["bytes"])) for f in files)
    overhead = (med(in_process) - med(alone)) * 1000
    ms = [[x * 1000 for x in xs] for xs in (in_process, alone, cli)]
    figures = [
        figure("direct `INSERT ... SELECT * FROM read_parquet([...])` (process)", direct, "s"),
        figure("`rocky load --connector` (process)", rocky, "s"),
        Figure("connector / direct (medians)", ratio, "x", "<=", 1.3,
               detail=f"{med(rocky):.2f} s / {med(direct):.2f} s"),
        figure("empty result: `execute_connector_load` in process", ms[0], "ms"),
        figure("empty result: the program on its own", ms[1], "ms"),
        Figure("framework overhead, empty result (in process minus program, medians)", overhead, "ms", "<=",
               300.0, detail=f"{med(ms[0]):.1f} ms - {med(ms[1]):.1f} ms"),
        figure("empty result: whole `rocky load --connector` process", ms[2], "ms"),
    ]
    result = SuiteResult(
        "connector", f"child connectors: {len(files)} Parquet files, {args.rows:,} rows (issue 8)",
        f"{len(files)} Parquet files of {args.rows:,} rows in total ({total_bytes:,} bytes) are loaded "
        "through `rocky load --connector` and, as the reference, by `INSERT INTO raw.events SELECT * FROM "
        "read_parquet([...])` in a Python child of its own; both are whole processes on a fresh warehouse "
        "file whose empty target table already exists, and both must leave every row in the target. The "
        "connector program hard-links the pre-generated files into its output directory, so the figure is "
        "Rocky's path: claim, launch, result checks, staging, drift, the INSERT, the state commit. Medians "
        f"of {args.rounds} interleaved rounds. The empty-result overhead is `execute_connector_load` in "
        "process (imports warmed by one untimed call) with a `/bin/sh` program that writes an empty result, "
        f"minus that program run on its own; medians of {empty_rounds}.",
        figures=figures,
    )
    print(write(args.json, result))
    return 0 if all(f.passed() is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
