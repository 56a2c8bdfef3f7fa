"""A/B of ``GET /api/v1/schedule`` between two checkouts (issue 12's regression): the server's CPU per GET.

Each checkout generates its own project (an older engine cannot read a newer store), then serves it with
this repository's venv and its own code on PYTHONPATH; the checkouts alternate per round. CPU time of the
server process (utime + stime from /proc) is the figure: it holds on a loaded machine where latency does
not. A checkout is made with ``git worktree add /tmp/old050 050d404``.

    .venv/bin/python bench/schedule_ab.py /tmp/old050 . [--rounds 5] [--gets 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BENCH_DIR, ROOT, child_env
from server_bench import Server, percentile

GENERATE = """
import subprocess, sys
from pathlib import Path
tree, out = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(tree / "bench"))
from harness import child_env
from tick_bench import ANCHOR, _iso, generate_project
config = generate_project(out, 1000, 1000)
subprocess.run([sys.argv[3], "-c", str(config), "tick", "--now", _iso(ANCHOR), "--output", "json"],
               cwd=out, env=child_env(), stdout=subprocess.DEVNULL, check=True)
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _code_env(tree: Path) -> None:
    # this checkout's code comes from the editable install; another one's from PYTHONPATH
    if tree == ROOT:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = str(tree)


def one_round(project: Path, gets: int) -> tuple[float, float, float]:
    server = Server(project)
    try:
        for _ in range(6):
            server.get("/api/v1/schedule")
        latencies = []
        cpu0 = _cpu_seconds(server.proc.pid)
        for _ in range(gets):
            t0 = time.perf_counter()
            status, _ = server.get("/api/v1/schedule")
            latencies.append(time.perf_counter() - t0)
            assert status == 200
        cpu = (_cpu_seconds(server.proc.pid) - cpu0) / gets
    finally:
        server.stop()
    return cpu * 1000, statistics.median(latencies) * 1000, percentile(latencies, 99) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--gets", type=int, default=200)
    args = parser.parse_args()
    trees = [t.resolve() for t in args.trees]
    rocky = str(ROOT / ".venv" / "bin" / "rocky")
    projects = {}
    for i, tree in enumerate(trees):
        _code_env(tree)
        projects[tree] = BENCH_DIR / "work" / "schedule-ab" / f"{i}-{tree.name}"
        env = child_env()
        subprocess.run([sys.executable, "-c", GENERATE, str(tree), str(projects[tree]), rocky], env=env,
                       check=True)
    figures: dict[Path, list[tuple[float, float, float]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else list(reversed(trees)):
            _code_env(tree)
            figures[tree].append(one_round(projects[tree], args.gets))
            print(f"round {r} {tree}: {figures[tree][-1]} load {os.getloadavg()[0]:.2f}", flush=True)
    for tree, rows in figures.items():
        cpu, p50, p99 = (statistics.median(col) for col in zip(*rows, strict=True))
        print(f"{tree}: server CPU/GET {cpu:.2f} ms, p50 {p50:.1f} ms, p99 {p99:.1f} ms (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
