"""Where a rocky first pass spends its time: one `rocky run` of the 2M-row table under py-spy.

py-spy (installed in .venv-bench by setup_peers.sh) samples the child from outside, 100 times a second,
including native frames of the driver and DuckDB; a sampler costs the profiled process nearly nothing, so
the shares are those of a normal run (cProfile would inflate the per-row Python calls it is meant to
expose). `--format raw` writes collapsed stacks; this module folds them into the top functions by self
time (the frame on top of the stack) and by total time (anywhere on the stack), as shares of all samples.
"""

from __future__ import annotations

import collections
import re
import subprocess
from pathlib import Path

from harness import BENCH_VENV, log
from replication_peers_configs import CONFIGS, command, fresh, write_project
from replication_peers_pg import Source, SourceServer

PY_SPY = BENCH_VENV / "bin" / "py-spy"
TOP = 15
_LINE = re.compile(r":\d+\)$")


def _frame(raw: str) -> str:
    """`name (path/to/module.py:123)` -> `name (module.py)`: lines of one function fold together."""
    raw = _LINE.sub(")", raw.strip())
    name, _, where = raw.partition(" (")
    return f"{name} ({Path(where.rstrip(')')).name})" if where else name


def fold(raw_path: Path) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    total = 0
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for line in raw_path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";") if f]
        total += n
        if frames:
            own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    return total, own, inclusive


def profile_rocky(server: SourceServer, source: Source, work: Path) -> list[str]:
    """Run one profiled first pass; returns report lines (also written to `work/profile.md`)."""
    config = CONFIGS["rocky"]
    write_project(config, source, server, "big", work)
    fresh(work)
    spec = command(config, source, server, "big", "first", work)
    raw = work / "py-spy.raw"
    argv = [str(PY_SPY), "record", "--native", "--rate", "100", "--format", "raw", "-o", str(raw), "--",
            *spec.argv]
    log(f"profiling a rocky first pass: {' '.join(argv[:8])} ...")
    with open(work / "profile.out", "wb") as out, open(work / "profile.err", "wb") as err:
        done = subprocess.run(argv, cwd=spec.cwd, env=spec.env, stdout=out, stderr=err, check=False)
    server.reset(source)
    if done.returncode != 0 or not raw.exists():
        return [f"profile: py-spy exited {done.returncode} (see {work}/profile.err)"]
    total, own, inclusive = fold(raw)
    lines = [f"profile of one rocky first pass ({total} samples at 100/s, py-spy --native): top {TOP} by "
             "self time: " + "; ".join(f"{f} {n / total:.0%}" for f, n in own.most_common(TOP))]
    lines.append(f"profile, top {TOP} by total time: "
                 + "; ".join(f"{f} {n / total:.0%}" for f, n in inclusive.most_common(TOP)))
    (work / "profile.md").write_text("\n\n".join(lines) + "\n")
    return lines
