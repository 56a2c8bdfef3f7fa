"""`rocky tick` with nothing due: the scheduler's standing cost, measured as whole processes.

Two figures (issue 6 budgets):

- a generated project with 1,000 scheduled pipelines (700 cron replication, 200 `after`, 100 freshness)
  over a state store holding 100,000 run records: median wall time at most 0.5 s;
- the playground (`examples/playground`, copied): median at most 0.25 s, importing neither duckdb nor
  pyarrow (checked in a separate, untimed process).

Each project is anchored first (the first tick records every cron anchor; it is not timed), then every
timed tick runs with `--now` ten seconds later, when no cron occurrence, no `after` and no freshness
budget is due. Bytecode caching is on for the children (`harness.child_env`: a PYTHONDONTWRITEBYTECODE
environment would otherwise time the compiler). `make bench` runs this as the `tick` workload of run_bench.

    .venv/bin/python bench/tick_bench.py [--rounds 7] [--pipelines 1000] [--runs 100000] [--work-dir DIR]
                                         [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BENCH_DIR, PY, ROCKY, ROOT, child_env
from suites import Figure, SuiteResult, figure, write

ANCHOR = datetime(2026, 5, 2, 3, 0, 30, tzinfo=UTC)
QUIET = ANCHOR + timedelta(seconds=10)


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def generate_project(root: Path, pipelines: int, runs: int) -> Path:
    """rocky.toml with ``pipelines`` scheduled pipelines and a state store with ``runs`` run records."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    n_cron = pipelines * 7 // 10
    n_after = pipelines * 2 // 10
    n_fresh = pipelines - n_cron - n_after
    parts = [
        '[adapter]\ntype = "duckdb"\npath = "bench.duckdb"\n',
        "[freshness]\nexpected_lag_seconds = 86400\n",
    ]
    names: list[str] = []
    for i in range(n_cron):
        name = f"rep_{i:04d}"
        names.append(name)
        cron = f"{1 + i % 59} {i % 24} * * *" if i % 3 else f"{1 + i % 59} * * * *"
        tz = ("UTC", "Europe/Lisbon", "America/New_York")[i % 3]
        parts.append(
            f"""
[pipeline.{name}]
type = "replication"
[pipeline.{name}.source.schema_pattern]
prefix = "src{i}"
components = ["tenant"]
[pipeline.{name}.target]
catalog_template = "bench"
schema_template = "t{i}__{{tenant}}"
[pipeline.{name}.schedule]
cron = "{cron}"
timezone = "{tz}"
"""
        )
    for kind, count in (("after", n_after), ("fresh", n_fresh)):
        for i in range(count):
            name = f"{kind}_{i:04d}"
            names.append(name)
            schedule = f'after = ["rep_{i % n_cron:04d}"]' if kind == "after" else "freshness = true"
            parts.append(
                f"""
[pipeline.{name}]
type = "snapshot"
unique_key = ["id"]
updated_at = "updated_at"
[pipeline.{name}.source]
catalog = "bench"
schema = "src"
table = "t{i}"
[pipeline.{name}.target]
catalog = "bench"
schema = "snap"
table = "t{i}"
[pipeline.{name}.schedule]
{schedule}
"""
            )
    config = root / "rocky.toml"
    config.write_text("".join(parts), encoding="utf-8")
    names_file = root / "pipelines.json"
    names_file.write_text(json.dumps(names), encoding="utf-8")
    # Seeded in a child: this process stays small, and Linux folds the parent's RSS into a child's
    # ru_maxrss at spawn, which would inflate every measured tick.
    subprocess.run(
        [str(PY), __file__, "--seed", str(root / ".rocky-state.db"), str(names_file), str(runs)],
        check=True, env=child_env(),
    )
    return config


def _seed_runs(state: Path, names: list[str], runs: int) -> None:
    """``runs`` records spread over the pipelines: each pipeline's newest success is recent and ordered so
    that no ``after`` pipeline is waiting on a newer upstream success and no freshness budget is spent."""
    sys.path.insert(0, str(ROOT))
    from rocky_engine.state import RunRecord, StateStore

    per = max(1, runs // len(names))
    records = []
    for index, name in enumerate(names):
        # upstreams (rep_*) finish before their downstreams (after_*) start
        downstream = not name.startswith("rep_")
        base = ANCHOR - timedelta(hours=2) + (timedelta(minutes=30) if downstream else timedelta())
        for k in range(per):
            started = base - timedelta(hours=k) + timedelta(microseconds=index)
            records.append(
                RunRecord(
                    run_id=f"run-{index:04d}-{k:05d}",
                    pipeline=name,
                    pipeline_type="replication" if name.startswith("rep_") else "snapshot",
                    started_at=started,
                    finished_at=started + timedelta(seconds=30),
                    status="Success" if k % 10 else ("Success" if k == 0 else "Failure"),
                    trigger="Schedule",
                )
            )
    with StateStore.open(state) as store:
        for chunk in range(0, len(records), 20_000):
            store.runs.insert_many(records[chunk : chunk + 20_000])


def measure(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, int, str]:
    """Wall seconds (spawn to reap), peak RSS KiB (wait4) and stdout of one process."""
    out, err = cwd / ".tick-bench.out", cwd / ".tick-bench.err"
    with out.open("wb") as fo, err.open("wb") as fe:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=child_env(), stdout=fo, stderr=fe, stdin=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err.read_text()[-2000:]}")
    return wall, int(usage.ru_maxrss), out.read_text()


def time_ticks(config: Path, rounds: int) -> tuple[list[float], list[int], dict[str, object]]:
    anchor = [str(ROCKY), "-c", str(config), "tick", "--now", _iso(ANCHOR), "--output", "json"]
    quiet = [str(ROCKY), "-c", str(config), "tick", "--now", _iso(QUIET), "--output", "json"]
    # The anchoring tick may launch runs (a never-succeeded freshness schedule); they may fail (exit 2) on
    # a copy with no warehouse, which leaves them in backoff: quiet for the timed ticks.
    measure(anchor, config.parent, ok=(0, 2))
    measure(quiet, config.parent)  # warm the bytecode and page cache
    walls: list[float] = []
    rss: list[int] = []
    last: dict[str, object] = {}
    for _ in range(rounds):
        wall, peak, out = measure(quiet, config.parent)
        walls.append(wall)
        rss.append(peak)
        last = json.loads(out)
    counts = last["counts"]
    assert isinstance(counts, dict)
    if counts["executed"] or counts["due"]:
        raise RuntimeError(f"the quiet tick was not quiet: {counts}")
    return walls, rss, counts


def heavy_imports(config: Path) -> list[str]:
    code = (
        "import sys\nfrom rocky_engine.cli.main import run_cli\n"
        f"run_cli(['-c', {str(config)!r}, 'tick', '--now', {_iso(QUIET)!r}, '--output', 'json'])\n"
        "heavy = ','.join(m for m in ('duckdb', 'pyarrow') if m in sys.modules)\n"
        "sys.stderr.write('HEAVY=' + heavy + '\\n')\n"
    )
    done = subprocess.run(
        [str(PY), "-c", code], cwd=config.parent, env=child_env(), capture_output=True, text=True, check=False
    )
    line = next((ln for ln in done.stderr.splitlines() if ln.startswith("HEAVY=")), None)
    if line is None:
        raise RuntimeError(f"the import check printed no HEAVY= line (exit {done.returncode}): "
                           f"{done.stderr[-2000:]}")
    return [m for m in line.removeprefix("HEAVY=").split(",") if m]


def playground_copy(work: Path) -> Path:
    target = work / "playground"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(
        ROOT / "examples" / "playground", target,
        ignore=shutil.ignore_patterns(".rocky", ".rocky-state*", "*.duckdb", "*.duckdb.wal", "__pycache__"),
    )
    return target / "rocky.toml"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--seed"]:
        _seed_runs(Path(argv[1]), json.loads(Path(argv[2]).read_text()), int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pipelines", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--work-dir", type=Path, default=BENCH_DIR / "work" / "tick")
    parser.add_argument("--json", type=Path, help="also write the figures here (run_bench reads them)")
    args = parser.parse_args(argv)
    args.work_dir = args.work_dir.resolve()  # children run in other directories
    args.work_dir.mkdir(parents=True, exist_ok=True)

    big = generate_project(args.work_dir / f"n{args.pipelines}", args.pipelines, args.runs)
    walls, rss, counts = time_ticks(big, args.rounds)
    figures = [
        figure(f"rocky tick, nothing due: {args.pipelines:,} pipelines, {args.runs:,} run records", walls,
               "s", "<=", 0.5, f"{counts['evaluated']} evaluated; peak RSS {max(rss) / 1024:.0f} MB"),
    ]
    pg = playground_copy(args.work_dir)
    walls, rss, counts = time_ticks(pg, args.rounds)
    figures.append(figure("rocky tick, nothing due: playground", walls, "s", "<=", 0.25,
                          f"{counts['evaluated']} evaluated; peak RSS {max(rss) / 1024:.0f} MB"))
    heavy = heavy_imports(pg)
    figures.append(Figure("playground tick: duckdb/pyarrow modules imported", float(len(heavy)), "", "<=",
                          0.0, detail="imported: " + (", ".join(heavy) or "none")))
    result = SuiteResult(
        "tick", "the scheduler's standing cost, `rocky tick` with nothing due (issue 6)",
        f"Whole `rocky tick --now ... --output json` processes, spawn to reap, median of {args.rounds} after "
        "one untimed anchoring tick and one untimed warm-up tick. The large project is generated: "
        f"{args.pipelines:,} scheduled pipelines (70% cron replication, 20% `after`, 10% freshness) over a "
        f"state store of {args.runs:,} run records; the playground is a copy of `examples/playground`. The "
        "timed ticks run ten seconds after the anchor, when nothing is due (checked: 0 due, 0 executed). "
        "The import check runs the playground tick in a separate, untimed process and lists which of "
        "duckdb and pyarrow ended up in `sys.modules`.",
        figures=figures,
    )
    print(write(args.json, result))
    return 0 if all(f.passed() is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
