"""Budgets of a Rocky run through Dagster (issue 14), measured and printed.

- the whole 1000-model bench project through ``dg.materialize`` (one subset-aware multi-asset, one
  streaming ``rocky run``) costs at most 10% over the same ``rocky run --pipeline bench`` from the CLI
- the first materialization reaches Dagster within 1 s of the engine finishing the first model

Both sides run the same engine on a fresh copy of the same seeded warehouse, without Rocky state; rounds
are interleaved (CLI, Dagster, CLI, Dagster ...) so a slow phase of the machine hits both. The Dagster
figure is the wall time of ``dg.materialize`` on an ephemeral instance (the multi-asset is built once,
before timing, as a code location does at load). The first-event latency is read from the instance: the
first ``ASSET_MATERIALIZATION`` record's timestamp minus its ``rocky/finished_at`` (the engine's event
time), both wall clocks of this machine.

    .venv/bin/python bench/dagster_run_bench.py [--models 1000] [--rounds 3] [--order-rows 2000]
                                                [--work-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import DB_FILE, generate
from harness import BENCH_DIR, ROCKY, _check_rocky, _drop_rocky_state, _fresh_db, measure, seed_warehouse
from suites import SuiteResult, figure, write


def main() -> int:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--order-rows", type=int, default=2000)
    parser.add_argument("--work-dir", type=Path, default=BENCH_DIR / "work" / "dagster-run")
    parser.add_argument("--json", type=Path, help="also write the figures here (run_bench reads them)")
    args = parser.parse_args()
    work = args.work_dir.resolve()
    project = generate(work / "project", args.models, args.order_rows, targets=("rocky", "raw"))
    seeded = seed_warehouse(project)
    rocky_dir = project.rocky_dir
    db = rocky_dir / DB_FILE

    import dagster as dg

    from dagster_rocky import RockyResource
    from dagster_rocky.models import build_rocky_model_assets

    os.chdir(rocky_dir)  # the engine resolves the warehouse path from its working directory
    rocky = RockyResource(binary_path=str(ROCKY), config_path=str(project.rocky_toml))
    assets = build_rocky_model_assets(rocky)

    def fresh() -> None:
        _fresh_db(seeded, db)
        _drop_rocky_state(rocky_dir)

    cli: list[float] = []
    through: list[float] = []
    first_lag: list[float] = []
    argv = [str(ROCKY), "-c", str(project.rocky_toml), "run", "--pipeline", "bench", "--output", "json"]
    for rnd in range(args.rounds):
        fresh()
        out, err = work / f"cli-{rnd}.out", work / f"cli-{rnd}.err"
        sample = measure(argv, cwd=rocky_dir, stdout=out, stderr=err, config="rocky", rnd=rnd)
        _check_rocky(sample, out, err)
        cli.append(sample.wall_s)
        fresh()
        with dg.DagsterInstance.ephemeral() as instance:
            t0 = time.perf_counter()
            result = dg.materialize(assets, resources={"rocky": rocky}, instance=instance)
            through.append(time.perf_counter() - t0)
            assert result.success
            entries = sorted(
                instance.all_logs(result.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION),
                key=lambda e: e.timestamp,
            )
            assert len(entries) == args.models, f"{len(entries)} materializations for {args.models} models"
            mat = entries[0].asset_materialization
            assert mat is not None
            finished = mat.metadata["rocky/finished_at"].value
            first_lag.append(entries[0].timestamp - float(finished))  # type: ignore[arg-type]
        print(f"round {rnd}: cli {cli[-1]:.2f} s, dagster {through[-1]:.2f} s, first event lag "
              f"{first_lag[-1]:.3f} s", file=sys.stderr, flush=True)
    ratio = [d / c for c, d in zip(cli, through, strict=True)]
    figures = [
        figure(f"rocky run, {args.models} models, CLI", cli, "s"),
        figure(f"the same run through dg.materialize ({args.models} streamed materializations)", through,
               "s"),
        figure("Dagster / CLI wall time (per interleaved round)", ratio, "x", "<=", 1.10),
        figure("first materialization recorded after the engine finished the first model", first_lag, "s",
               "<=", 1.0),
    ]
    result_doc = SuiteResult(
        "dagster-run", f"a {args.models}-model Rocky run through Dagster vs the CLI (issue 14)",
        f"Medians of {args.rounds} interleaved rounds, each from a fresh copy of the seeded warehouse "
        f"({args.order_rows:,} orders) without Rocky state. CLI: `rocky run --pipeline bench --output json`. "
        "Dagster: `dg.materialize` of the multi-asset `build_rocky_model_assets` built (one streaming "
        "`rocky run`), ephemeral instance. Ratio median "
        f"{statistics.median(ratio):.2f}.",
        figures=figures,
    )
    print(write(args.json, result_doc))
    return 0 if all(f.passed() is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
