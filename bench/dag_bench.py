"""`rocky dag` on a generated 10,000-model project: the document orchestrators build their assets from.

One figure (issue 14 budget): whole `rocky dag --output json` processes on the benchmark DAG
(`generate.py`, Rocky files only) with 10,000 models: median wall time at most 3 s. Each timed process
reads every model file, resolves the graph and writes the whole document (checked: one node per model).
Bytecode caching is on for the children (`harness.child_env`). `make bench` runs this as the `dag` workload
of run_bench.

    .venv/bin/python bench/dag_bench.py [--rounds 5] [--models 10000] [--work-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate
from harness import BENCH_DIR, ROCKY, measure
from suites import SuiteResult, figure, write

BUDGET_S = 3.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", type=int, default=10_000)
    parser.add_argument("--work-dir", type=Path, default=BENCH_DIR / "work" / "dag")
    parser.add_argument("--json", type=Path, help="also write the figures here (run_bench reads them)")
    args = parser.parse_args(argv)
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    project = generate(work / f"n{args.models}", args.models, order_rows=10, targets=("rocky",))
    out = work / "dag.json"
    argv_dag = [str(ROCKY), "dag", "--output", "json"]
    measure(argv_dag, cwd=project.rocky_dir, stdout=out)  # warm-up: the page cache holds the model files
    walls, cpus, rss = [], [], []
    for rnd in range(args.rounds):
        sample = measure(argv_dag, cwd=project.rocky_dir, stdout=out, config="rocky", rnd=rnd)
        if sample.returncode != 0:
            raise SystemExit(f"rocky dag exited {sample.returncode}")
        walls.append(sample.wall_s)
        cpus.append(sample.cpu_s)
        rss.append(sample.maxrss_kib)
    doc = json.loads(out.read_text(encoding="utf-8"))
    found = doc["summary"]["counts_by_kind"].get("transformation", 0)
    if found != project.n_models:
        raise SystemExit(f"rocky dag listed {found} models of {project.n_models}")
    result = SuiteResult(
        "dag", "`rocky dag` on a generated project (issue 14)",
        f"Whole `rocky dag --output json` processes, spawn to reap, median of {args.rounds} after one "
        f"untimed warm-up, on the benchmark DAG (`bench/generate.py`) with {args.models:,} models. "
        "Checked: the document lists every model.",
        figures=[figure(f"rocky dag: {args.models:,} models", walls, "s", "<=", BUDGET_S,
                        f"{doc['summary']['total_edges']:,} edges; peak RSS {max(rss) / 1024:.0f} MB"),
                 # CPU time tells a slow program from a busy machine (the wall time includes waiting).
                 figure(f"rocky dag: {args.models:,} models, CPU time (user + system)", cpus, "s")],
    )
    print(write(args.json, result))
    return 0 if all(f.passed() is not False for f in result.figures) else 1


if __name__ == "__main__":
    sys.exit(main())
