"""Dagster's own cost per streamed asset, with no engine at all: the floor of the through-Dagster budget.

One subset-aware multi-asset of N specs (the shape `build_rocky_model_assets` builds: model i reads model
i-20, the first 20 read nothing, `code_version` set, `skippable`) whose body only yields one
`MaterializeResult` per asset in DAG order, with metadata of the size Rocky's has; `dg.materialize` on an
ephemeral instance, as in bench/dagster_run_bench.py. Whatever this costs, any integration that reports
N assets from one Dagster step pays at least that. Prints wall and CPU seconds per N.

``--mode`` says what the body reports: ``result`` (the default, what the Rocky multi-asset does: one
``MaterializeResult`` per asset), ``log`` (``context.log_event(AssetMaterialization)`` per asset and no
outputs, which loses code versions on the materializations and skips downstream steps of other
multi-assets, so Rocky does not use it) and ``none`` (the body reports nothing: what Dagster costs for a
run that selects N assets before any asset is reported, mostly one stored ASSET_MATERIALIZATION_PLANNED
event per asset).

    .venv/bin/python bench/dagster_floor_bench.py [--models 250 500 1000] [--mode result|log|none]
"""


import argparse
import os
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

ROOTS = 20


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def floor(n: int, mode: str = "result") -> tuple[float, float]:

    keys = [dg.AssetKey(["warehouse", "bench", f"m_{i:04d}"]) for i in range(n)]
    specs = [
        dg.AssetSpec(key, deps=[keys[i - ROOTS]] if i >= ROOTS else [], code_version=f"{i:016x}",
                     skippable=True, group_name="bench")
        for i, key in enumerate(keys)
    ]

    @dg.multi_asset(specs=specs, can_subset=True, name="floor")
    def floor_asset(context: dg.AssetExecutionContext) -> Iterator[Any]:
        for key in keys:
            metadata = {
                "dagster/row_count": 100, "rocky/rows_copied": 100, "dagster/duration_ms": 3,
                "strategy": "full_refresh", "target_table_full_name": ".".join(key.path),
                "rocky/run_id": "run-1", "rocky/pipeline": "bench",
            }
            if mode == "result":
                yield dg.MaterializeResult(asset_key=key, metadata=metadata)
            elif mode == "log":
                context.log_event(dg.AssetMaterialization(asset_key=key, metadata=metadata))

    with dg.DagsterInstance.ephemeral() as instance:
        c0, t0 = cpu(), time.perf_counter()
        result = dg.materialize([floor_asset], instance=instance)
        wall, used = time.perf_counter() - t0, cpu() - c0
        assert result.success
    return wall, used


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, nargs="+", default=[250, 500, 1000])
    parser.add_argument("--mode", choices=["result", "log", "none"], default="result")
    args = parser.parse_args()
    for n in args.models:
        wall, used = floor(n, args.mode)
        print(f"{args.mode}: {n} assets: {wall:.2f} s wall, {used:.2f} s cpu "
              f"({used / n * 1000:.1f} ms cpu per asset); "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
