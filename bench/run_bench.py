"""Benchmark entry point (`make bench`): every budget of the issues, one section each in bench/results.md.

Rocky vs the raw DuckDB limit vs dbt on a generated DAG, replication and drift, startup, and the budget
scripts (dagster, tick, connector, server) run as children; see bench/README.md.

Examples:
    .venv/bin/python bench/run_bench.py                          # everything, default rounds
    .venv/bin/python bench/run_bench.py --sizes 100 --rounds 1   # quick look
    .venv/bin/python bench/run_bench.py --only startup           # help / validate timings only
    .venv/bin/python bench/run_bench.py --only workloads --workloads replication,drift --merge
    .venv/bin/python bench/run_bench.py --workloads dagster,tick,connector,server --merge
    .venv/bin/python bench/run_bench.py --workloads replication-peers --merge   # ~40 min: dlt, Sling
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drift_workload import DriftResult, run_drift
from harness import (
    BENCH_DIR,
    BENCH_VENV,
    CONFIGS,
    DBT,
    PY,
    ROCKY,
    ROOT,
    WORKLOADS,
    BenchError,
    StartupResult,
    WorkloadResult,
    compile_bytecode,
    log,
    run_startup,
    run_workload,
)
from replication_workload import ReplicationResult, run_replication
from report import BYTECODE_FACT, render
from results_store import BenchRun, load, locked, merged_earlier, save
from suites import SCRIPTS, SuiteResult, run_suite

#: run once each (not per DAG size); every other workload is a transformation DAG timed per size
ONCE_WORKLOADS = ("replication", "drift", *SCRIPTS)
#: every name --workloads accepts, in the default order (startup is timed first whatever the order)
ALL_WORKLOADS = (*WORKLOADS, *ONCE_WORKLOADS, "startup")


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100,1000", help="DAG sizes, comma separated (default 100,1000)")
    p.add_argument("--rounds", type=int, default=None,
                   help="interleaved rounds per size (default: env BENCH_ROUNDS, else 5 for N<=100, 3 "
                   "above); when given, also passed to the dagster, tick, connector and replication-peers "
                   "scripts")
    p.add_argument("--workloads", default=",".join(ALL_WORKLOADS),
                   help=f"comma separated, from {', '.join(ALL_WORKLOADS)} (default: all; exactly these "
                   "run. All but the transformation workloads run once, not per size; dagster, tick, "
                   "connector, server and replication-peers run bench/<name>_bench.py as a child)")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help="configurations to time (raw-serial always runs: it is the row-count reference)")
    p.add_argument("--skip-dbt", action="store_true", help="do not time dbt (no bench venv needed)")
    p.add_argument("--only", choices=("startup", "workloads"),
                   help="startup: only the startup timings; workloads: the selected workloads but startup")
    p.add_argument("--startup-rounds", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work-dir", default=str(BENCH_DIR / "work"), help="generated projects and run logs")
    p.add_argument("--out", default=str(BENCH_DIR / "results.md"))
    p.add_argument("--render-only", action="store_true",
                   help="measure nothing: rewrite OUT from the figures already in OUT's .json")
    p.add_argument("--merge", action="store_true",
                   help="keep the sections of the existing results (read from OUT's .json) that this run "
                   "does not measure again, each with its own command and machine facts")
    return p.parse_args(argv)


def rounds_for(n: int, args: argparse.Namespace) -> int:
    """Rounds for a DAG of `n` models; the replication workload uses `n = 0` (5 rounds by default)."""
    if args.rounds is not None:
        return int(args.rounds)
    if os.environ.get("BENCH_ROUNDS"):
        return int(os.environ["BENCH_ROUNDS"])
    return 5 if n <= 100 else 3


def _probe(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return "unavailable"
    return done.stdout.strip() if done.returncode == 0 else "unavailable"


def _commit() -> str:
    """HEAD, and whether the measured tree differs from it (figures then belong to uncommitted code)."""
    head = _probe(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _probe(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return f"{head} (plus uncommitted changes)" if dirty not in ("", "unavailable") else head


def machine_facts(with_dbt: bool) -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = "import duckdb, sys; from importlib.metadata import version as v; "
    facts = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "os": platform.platform(),
        "python (.venv)": _probe([str(PY), "-c", "import sys; print(sys.version.split()[0])"]),
        "duckdb (.venv)": _probe([str(PY), "-c", versions + "print(duckdb.__version__)"]),
        "rocky": _probe([str(PY), "-c", versions + "print(v('rocky'))"]),
        "commit": _commit(),
        BYTECODE_FACT: "PYTHONDONTWRITEBYTECODE unset; rocky_engine and dagster_rocky byte-compiled first",
    }
    if with_dbt:
        code = versions + ("print(f\"dbt-core {v('dbt-core')}, dbt-duckdb {v('dbt-duckdb')}, "
                           "duckdb {duckdb.__version__}\")")
        facts["dbt (.venv-bench)"] = _probe([str(BENCH_VENV / "bin" / "python"), "-c", code])
    return facts


def preflight(configs: tuple[str, ...], need_rocky: bool) -> None:
    if need_rocky:
        if not ROCKY.exists():
            raise BenchError(f"{ROCKY} not found: install the project (`.venv/bin/pip install -e .`)")
        help_text = _probe([str(ROCKY), "--help"])
        if "rocky" in configs and " run" not in help_text:
            raise BenchError("`rocky --help` lists no `run` command yet; pass --configs without rocky")
    if "dbt" in configs and not DBT.exists():
        raise BenchError(f"{DBT} not found: run `bash bench/setup_dbt.sh` first (make bench does)")


def render_only(out: Path) -> int:
    """Rewrite results.md from results.json (after a change to report.py; no figure changes)."""
    runs = load(out.with_suffix(".json"))
    if not runs:
        print(f"render-only: no readable {out.with_suffix('.json')}", file=sys.stderr)
        return 1
    cur = runs[0]
    out.write_text(render(cur.workloads, cur.startup, cur.facts, cur.command, replication=cur.replication,
                          drift=cur.drift, suites=cur.suites, earlier=runs[1:]))
    log(f"wrote {out} from {out.with_suffix('.json')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configs = tuple(c for c in _csv(args.configs) if not (args.skip_dbt and c == "dbt"))
    unknown = [c for c in configs if c not in CONFIGS]
    unknown += [w for w in _csv(args.workloads) if w not in ALL_WORKLOADS]
    if unknown:
        print(f"unknown configuration or workload: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.render_only:
        return render_only(Path(args.out))
    work_dir = Path(args.work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    selected = ["startup"] if args.only == "startup" else _csv(args.workloads)
    do_startup = "startup" in selected and args.only != "workloads"
    dag_workloads = [w for w in selected if w in WORKLOADS]
    once = [w for w in selected if w in ONCE_WORKLOADS]
    given = argv if argv is not None else sys.argv[1:]
    command = shlex.join([".venv/bin/python", "bench/run_bench.py", *given])
    try:
        preflight(configs if dag_workloads else (), need_rocky=do_startup or bool(once) or "rocky" in configs)
        facts = machine_facts(with_dbt=bool(dag_workloads) and "dbt" in configs)
        compile_bytecode()
        workloads: list[WorkloadResult] = []
        startup: list[StartupResult] = []
        replication: list[ReplicationResult] = []
        drift: list[DriftResult] = []
        suites: list[SuiteResult] = []
        if do_startup:
            log("startup timings")
            startup = run_startup(args.startup_rounds, work_dir)
        if dag_workloads:
            for n in (int(x) for x in _csv(args.sizes)):
                for workload in dag_workloads:
                    rounds = rounds_for(n, args)
                    workloads.append(run_workload(workload, n, rounds, configs, work_dir, args.seed))
        if "replication" in once:
            replication.append(run_replication(rounds_for(0, args), work_dir))
        if "drift" in once:
            drift.append(run_drift(work_dir))
        for name in (w for w in once if w in SCRIPTS):
            suites.append(run_suite(name, work_dir, args.rounds))
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    facts["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = Path(args.out)
    current = BenchRun(command, facts, workloads, startup, replication, drift, suites)
    # Locked: two partial runs finishing together must not drop each other's sections.
    with locked(out.with_suffix(".json")):
        earlier = merged_earlier(out.with_suffix(".json"), current) if args.merge else []
        out.write_text(render(workloads, startup, facts, command, replication=replication, drift=drift,
                              suites=suites, earlier=earlier))
        save(out.with_suffix(".json"), current, earlier)
    log(f"wrote {out}")
    print(out.read_text())
    crashed = [s.workload for s in suites if s.error]
    if crashed:
        print(f"bench: {', '.join(crashed)} crashed before measuring (see its section)", file=sys.stderr)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
