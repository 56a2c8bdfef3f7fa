"""Budgets of the Dagster integration (issue 4), measured and printed.

- a ``rocky_source_sensor`` evaluation over a discover result of 10,000 sources x 5 tables: <= 5 s
  (first tick: every source is new, 10,000 requests; steady tick: nothing new; and a tick with 100 syncs)
- ``load_rocky_assets`` over the same: <= 10 s (and the multi-asset factory, for information)
- importing ``dagster_rocky`` after ``dagster``: <= 0.3 s (fresh interpreter each round)

The engine invocation is real (a child process through ``RockyResource``); the binary is a stand-in that
prints a generated discover document, because no warehouse here has 10,000 connector schemas. The figures
therefore include process start, JSON parsing, translation and the sensor's own work.

    .venv/bin/python bench/dagster_bench.py [--sources 10000] [--tables 5] [--rounds 3] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BUDGETS = {
    "sensor_first_tick": 5.0,
    "sensor_steady_tick": 5.0,
    "sensor_100_new_syncs": 5.0,
    "load_rocky_assets": 10.0,
    "import_dagster_rocky": 0.3,
}


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


def timed(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    samples: list[float] = []
    result: Any = None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), result


def import_time(rounds: int) -> float:
    code = (
        "import time, dagster\nt = time.perf_counter()\nimport dagster_rocky\nprint(time.perf_counter() - t)"
    )
    samples = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        samples.append(float(out.strip().splitlines()[-1]))
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sources", type=int, default=10_000)
    parser.add_argument("--tables", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()

    import dagster as dg

    from dagster_rocky import RockyResource, build_rocky_assets, load_rocky_assets, rocky_source_sensor

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rocky-dagster-bench-") as tmp:
        work = Path(tmp)
        rocky = RockyResource(binary_path=stand_in_binary(work, discover_document(args.sources, args.tables)))
        sensor = rocky_source_sensor(target=dg.AssetSelection.all())

        def tick(cursor: str | None) -> dg.SensorResult:
            with dg.build_sensor_context(cursor=cursor, resources={"rocky": rocky}) as ctx:
                result = sensor(ctx)
            assert isinstance(result, dg.SensorResult)
            return result

        figures["sensor_first_tick"], first = timed(lambda: tick(None), args.rounds)
        assert len(first.run_requests or []) == args.sources
        figures["sensor_steady_tick"], steady = timed(lambda: tick(first.cursor), args.rounds)
        assert not steady.run_requests
        moved = {i: 3600 for i in range(0, args.sources, max(1, args.sources // 100))}
        rocky = RockyResource(
            binary_path=stand_in_binary(work, discover_document(args.sources, args.tables, moved))
        )
        figures["sensor_100_new_syncs"], some = timed(lambda: tick(first.cursor), args.rounds)
        assert len(some.run_requests or []) == len(moved)
        figures["load_rocky_assets"], specs = timed(lambda: load_rocky_assets(rocky), args.rounds)
        assert len(specs) == args.sources * args.tables
        figures["build_rocky_assets"], _ = timed(lambda: build_rocky_assets(rocky), 1)
    figures["import_dagster_rocky"] = import_time(max(args.rounds, 5))

    print(f"dagster_rocky budgets ({args.sources} sources x {args.tables} tables, median of {args.rounds})")
    print(f"{'figure':<26} {'seconds':>9} {'budget':>8}  verdict")
    worst = 0
    for name, value in figures.items():
        budget = BUDGETS.get(name)
        verdict = "-" if budget is None else ("ok" if value <= budget else "OVER BUDGET")
        worst |= int(verdict == "OVER BUDGET")
        print(f"{name:<26} {value:>9.3f} {budget if budget is not None else '':>8}  {verdict}")
    if args.out:
        args.out.write_text(json.dumps({"figures": figures, "budgets": BUDGETS}, indent=2) + "\n")
    return worst


if __name__ == "__main__":
    sys.exit(main())
