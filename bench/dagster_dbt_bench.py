"""The peer of the through-Dagster budget: the same generated project as dbt models, `dbt build` from the
CLI vs `dg.materialize` of dagster-dbt's `@dbt_assets` (`dbt.cli(["build"]).stream()`).

Runs in the separate venv of bench/setup_dagster_dbt.sh (dbt + the project's Dagster + dagster-dbt; never
the project venv). Rounds are interleaved (CLI, Dagster, ...), each from a fresh copy of the seeded
warehouse; wall time and the CPU time of the process tree are printed (the machine may be loaded).

    bench/work/venv-dagster-dbt/bin/python bench/dagster_dbt_bench.py [--models 1000] [--rounds 1]
"""


import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
from dagster_dbt import DbtCliResource, dbt_assets  # the bench venv's (bench/setup_dagster_dbt.sh)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import DB_FILE, generate

HERE = Path(__file__).resolve().parent


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--order-rows", type=int, default=2000)
    parser.add_argument("--work-dir", type=Path, default=HERE / "work" / "dagster-dbt")
    args = parser.parse_args()
    project = generate(args.work_dir.resolve() / "project", args.models, args.order_rows, targets=("dbt",))
    dbt_dir = project.dbt_dir
    db, seeded = dbt_dir / DB_FILE, project.root / "seeded.duckdb"
    import duckdb

    with duckdb.connect(str(seeded)) as con:
        con.execute(project.seed_sql.read_text())
    os.environ["BENCH_DUCKDB_PATH"] = str(db)
    dbt = str(Path(sys.executable).parent / "dbt")
    common = ["--profiles-dir", str(dbt_dir), "--project-dir", str(dbt_dir)]
    subprocess.run([dbt, "parse", *common], check=True, capture_output=True)  # manifest, warm parse cache

    @dbt_assets(manifest=dbt_dir / "target" / "manifest.json")
    def bench_models(context: dg.AssetExecutionContext, dbt: DbtCliResource):  # type: ignore[no-untyped-def]
        yield from dbt.cli(["build", "--threads", "4"], context=context).stream()

    resource_ = DbtCliResource(project_dir=str(dbt_dir), profiles_dir=str(dbt_dir), dbt_executable=dbt)
    cli: list[tuple[float, float]] = []
    through: list[tuple[float, float]] = []
    for rnd in range(args.rounds):
        shutil.copyfile(seeded, db)
        c0, t0 = cpu(), time.perf_counter()
        subprocess.run([dbt, "build", "--threads", "4", *common], check=True, capture_output=True)
        cli.append((time.perf_counter() - t0, cpu() - c0))
        shutil.copyfile(seeded, db)
        with dg.DagsterInstance.ephemeral() as instance:
            c0, t0 = cpu(), time.perf_counter()
            result = dg.materialize([bench_models], resources={"dbt": resource_}, instance=instance)
            through.append((time.perf_counter() - t0, cpu() - c0))
            assert result.success
            mats = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            assert len(mats) == args.models, len(mats)
        print(f"round {rnd}: dbt build {cli[-1][0]:.2f} s wall / {cli[-1][1]:.2f} s cpu, dagster-dbt "
              f"{through[-1][0]:.2f} s wall / {through[-1][1]:.2f} s cpu; load {os.getloadavg()[0]:.1f}",
              flush=True)
    wall = statistics.median(d[0] / c[0] for c, d in zip(cli, through, strict=True))
    cpu_ratio = statistics.median(d[1] / c[1] for c, d in zip(cli, through, strict=True))
    print(f"{args.models} models: dagster-dbt / dbt build = {wall:.2f}x wall, {cpu_ratio:.2f}x cpu")
    return 0


if __name__ == "__main__":
    sys.exit(main())
