"""Budgets of the Dagster integration (issue 4), measured and printed.

- a ``rocky_source_sensor`` evaluation over a discover result of 10,000 sources x 5 tables: <= 5 s
  (first tick: every source is new, 10,000 requests; steady tick: nothing new; and a tick with 100 syncs)
- ``load_rocky_assets`` over the same: <= 10 s (and the multi-asset factory, for information)
- importing ``dagster_rocky`` after ``dagster``: <= 0.3 s (fresh interpreter each round)

The engine invocation is real (a child process through ``RockyResource``); the binary is a stand-in that
prints a generated discover document, because no warehouse here has 10,000 connector schemas. The figures
therefore include process start, JSON parsing, translation and the sensor's own work. The import figure
is taken in fresh interpreters with bytecode caching on (`harness.child_env`). `make bench` runs this as
the `dagster` workload of run_bench.

    .venv/bin/python bench/dagster_bench.py [--sources 10000] [--tables 5] [--rounds 3] [--work-dir DIR]
                                            [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BENCH_DIR, PY, child_env
from suites import SuiteResult, figure, write


def discover_document(n_sources: int, n_tables: int, shift: dict[int, int] | None = None) -> dict[str, Any]:
    """``rocky discover`` JSON: n sources over 100 tenants, each with n tables and a sync time."""
    base = datetime(2026, 5, 1, tzinfo=UTC)
    sources = []
    for i in range(n_sources):
        sync = base + timedelta(seconds=i + (shift or {}).get(i, 0))
        sources.append(
            {
                "id": f"conn_{i:05d}",
                "components": {"tenant": f"tenant_{i % 100:03d}", "connector": f"shop_{i:05d}"},
                "source_type": "fivetran",
                "last_sync_at": sync.isoformat().replace("+00:00", "Z"),
                "tables": [{"name": f"table_{t}"} for t in range(n_tables)],
            }
        )
    return {
        "version": "bench",
        "command": "discover",
        "sources": sources,
        "checks": {"freshness": {"threshold_seconds": 86400}},
    }


def stand_in_binary(work: Path, document: dict[str, Any]) -> str:
    doc = work / "discover.json"
    doc.write_text(json.dumps(document))
    script = work / "rocky-bench"
    script.write_text(f"#!/bin/sh\ncat '{doc}'\n")
    script.chmod(0o755)
    return str(script)


def timed(fn: Callable[[], Any], rounds: int) -> tuple[list[float], Any]:
    samples: list[float] = []
    result: Any = None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return samples, result


def import_time(rounds: int) -> list[float]:
    """Seconds `import dagster_rocky` takes once dagster is imported, each in a fresh interpreter."""
    code = (
        "import time, dagster\nt = time.perf_counter()\nimport dagster_rocky\nprint(time.perf_counter() - t)"
    )
    samples = []
    for _ in range(rounds):
        out = subprocess.run([str(PY), "-c", code], check=True, capture_output=True, text=True,
                             env=child_env()).stdout
        samples.append(float(out.strip().splitlines()[-1]))
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sources", type=int, default=10_000)
    parser.add_argument("--tables", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=BENCH_DIR / "work" / "dagster")
    parser.add_argument("--json", type=Path, help="also write the figures here (run_bench reads them)")
    args = parser.parse_args()
    args.work_dir = args.work_dir.resolve()  # children run in other directories

    import dagster as dg

    from dagster_rocky import RockyResource, build_rocky_assets, load_rocky_assets, rocky_source_sensor

    work = args.work_dir / "stand-in"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    n, rounds = args.sources, args.rounds
    rocky = RockyResource(binary_path=stand_in_binary(work, discover_document(n, args.tables)))
    sensor = rocky_source_sensor(target=dg.AssetSelection.all())

    def tick(cursor: str | None) -> dg.SensorResult:
        with dg.build_sensor_context(cursor=cursor, resources={"rocky": rocky}) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        return result

    samples, first = timed(lambda: tick(None), rounds)
    assert len(first.run_requests or []) == n
    figures = [figure(f"sensor tick, first ({n:,} new sources -> {n:,} run requests)", samples, "s", "<=",
                      5.0)]
    samples, steady = timed(lambda: tick(first.cursor), rounds)
    assert not steady.run_requests
    figures.append(figure("sensor tick, steady (nothing new -> 0 run requests)", samples, "s", "<=", 5.0))
    moved = {i: 3600 for i in range(0, n, max(1, n // 100))}
    rocky = RockyResource(binary_path=stand_in_binary(work, discover_document(n, args.tables, moved)))
    samples, some = timed(lambda: tick(first.cursor), rounds)
    assert len(some.run_requests or []) == len(moved)
    figures.append(figure(f"sensor tick, {len(moved)} new syncs -> {len(moved)} run requests", samples, "s",
                          "<=", 5.0))
    samples, specs = timed(lambda: load_rocky_assets(rocky), rounds)
    assert len(specs) == n * args.tables
    figures.append(figure(f"load_rocky_assets ({len(specs):,} asset specs)", samples, "s", "<=", 10.0))
    samples, _ = timed(lambda: build_rocky_assets(rocky), 1)
    figures.append(figure("build_rocky_assets (multi-asset factory)", samples, "s"))
    figures.append(figure("import dagster_rocky after dagster (fresh interpreter)",
                          import_time(max(rounds, 5)), "s", "<=", 0.3))
    shutil.rmtree(work, ignore_errors=True)
    result = SuiteResult(
        "dagster", f"the Dagster integration over {n:,} sources x {args.tables} tables (issue 4)",
        f"In one process that has imported dagster and dagster_rocky, medians of {rounds} calls. The engine "
        "is invoked for real (a child process through `RockyResource`), but its binary is a stand-in that "
        f"prints a generated `rocky discover` document of {n:,} sources over 100 tenants, because no "
        "warehouse here has that many connector schemas; each figure therefore includes that process's "
        "start, JSON parsing, translation and the sensor's own work. The import figure is `import "
        "dagster_rocky` timed inside a fresh interpreter that has already imported dagster, median of "
        f"{max(rounds, 5)}, bytecode caching on.",
        figures=figures,
    )
    print(write(args.json, result))
    return 0 if all(f.passed() is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
