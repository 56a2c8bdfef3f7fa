"""Timing harness: run each configuration as its own child process and record wall time and peak RSS.

Peak RSS comes from `os.wait4` (ru_maxrss, KiB on Linux). Linux folds the parent's RSS at spawn time into
the child's ru_maxrss, so this process never imports duckdb: seeding and row counting run in children too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from generate import DB_FILE, GeneratedProject, generate

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
PY = ROOT / ".venv" / "bin" / "python"
ROCKY = ROOT / ".venv" / "bin" / "rocky"
BENCH_VENV = ROOT / ".venv-bench"
DBT = BENCH_VENV / "bin" / "dbt"
RAW_RUNNER = BENCH_DIR / "raw_runner.py"
CONFIGS = ("raw-serial", "raw-2", "rocky", "dbt")
WORKLOADS = {"realistic": 100_000, "overhead": 1_000}


class BenchError(RuntimeError):
    """A run failed or produced different tables: the figures would be meaningless."""


@dataclass(frozen=True)
class Sample:
    """One timed child process."""

    config: str
    round: int
    wall_s: float
    maxrss_kib: int
    returncode: int
    #: user + system CPU seconds of the child: what the wall time would be on an idle machine, roughly
    cpu_s: float = 0.0


@dataclass
class WorkloadResult:
    """All samples of one workload at one DAG size."""

    workload: str
    n_models: int
    order_rows: int
    rounds: int
    samples: list[Sample] = field(default_factory=list)
    tables_checked: int = 0


@dataclass
class StartupResult:
    """Repeated timings of one short command (help, validate)."""

    name: str
    command: str
    budget_s: float
    samples: list[Sample] = field(default_factory=list)
    note: str = ""


def child_env() -> dict[str, str]:
    """The environment of every timed child: no ROCKY_* settings of the caller, bytecode caching on.

    This machine sets PYTHONDONTWRITEBYTECODE=1, which would make every child recompile the sources it
    imports; an installed rocky has its .pyc files (pip compiles them), so timed children run without it.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_bytecode() -> None:
    """Write the .pyc files of the project's packages once, as `pip install` would, before any timing."""
    _child([str(PY), "-m", "compileall", "-q", str(ROOT / "rocky_engine"), str(ROOT / "dagster_rocky")],
           "byte-compiling rocky_engine and dagster_rocky", env=child_env())


def measure(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
            stdout: Path | None = None, stderr: Path | None = None, config: str = "", rnd: int = 0) -> Sample:
    """Run `argv` to completion; wall clock from spawn to reap, peak RSS from wait4.

    `env` defaults to `child_env()` (bytecode caching on), so every timed child is treated alike.
    """
    env = child_env() if env is None else env
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115 - closed below
    err = open(stderr, "wb") if stderr else subprocess.DEVNULL  # noqa: SIM115
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen from waiting again
    finally:
        for f in (out, err):
            if not isinstance(f, int):
                f.close()
    return Sample(config, rnd, wall, int(usage.ru_maxrss), proc.returncode,
                  usage.ru_utime + usage.ru_stime)


def _child(argv: list[str], what: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise BenchError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def seed_warehouse(project: GeneratedProject) -> Path:
    """Create the seeded warehouse file once; every timed run starts from a fresh copy of it."""
    seeded = project.root / "seeded.duckdb"
    seeded.unlink(missing_ok=True)
    _child([str(PY), str(RAW_RUNNER), "seed", str(seeded), str(project.seed_sql)], "seeding the warehouse")
    return seeded


def count_rows(db: Path, project: GeneratedProject) -> dict[str, int]:
    argv = [str(PY), str(RAW_RUNNER), "count", str(db), str(project.plan_json)]
    out = _child(argv, f"counting rows in {db}")
    counts: dict[str, int] = json.loads(out)
    return counts


def _fresh_db(seeded: Path, target: Path) -> None:
    for p in (target, target.with_name(target.name + ".wal")):
        p.unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(seeded, target)


def _drop_rocky_state(rocky_dir: Path) -> None:
    """Every Rocky run starts without history, like every other configuration."""
    for p in [*(rocky_dir / "models").glob(".rocky-state*"), rocky_dir / ".rocky"]:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)


def _dbt_env(db: Path) -> dict[str, str]:
    env = child_env()
    # No tracking calls (no network here) and no version nag; the path comes in through profiles.yml.
    env.update(DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1", DBT_VERSION_CHECK="false",
               BENCH_DUCKDB_PATH=str(db))
    return env


@dataclass(frozen=True)
class RunSpec:
    """How one configuration runs against one project."""

    name: str
    db: Path
    argv: list[str]
    cwd: Path
    env: dict[str, str] | None
    check: Callable[[Sample, Path, Path], None]


def _check_exit(sample: Sample, out: Path, err: Path) -> None:
    if sample.returncode != 0:
        tail = err.read_text(errors="replace")[-3000:] + out.read_text(errors="replace")[-3000:]
        raise BenchError(f"{sample.config} round {sample.round} exited {sample.returncode}:\n{tail}")


def _check_rocky(sample: Sample, out: Path, err: Path) -> None:
    _check_exit(sample, out, err)
    try:
        status = json.loads(out.read_text()).get("status")
    except (ValueError, AttributeError) as exc:
        raise BenchError(f"rocky run printed no JSON document on stdout ({out}): {exc}") from exc
    if status != "Success":
        raise BenchError(f"rocky run status {status!r}, expected 'Success' (see {out}, {err})")


def run_specs(project: GeneratedProject, configs: tuple[str, ...]) -> list[RunSpec]:
    raw_db = project.root / "raw" / DB_FILE
    raw = [str(PY), str(RAW_RUNNER)]
    specs = {
        "raw-serial": RunSpec("raw-serial", raw_db, [*raw, "serial", str(raw_db), str(project.plan_json)],
                              project.root, None, _check_exit),
        "raw-2": RunSpec("raw-2", raw_db, [*raw, "two", str(raw_db), str(project.plan_json)],
                         project.root, None, _check_exit),
        "rocky": RunSpec("rocky", project.rocky_dir / DB_FILE,
                         [str(ROCKY), "-c", str(project.rocky_toml), "run", "--pipeline", "bench",
                          "--output", "json"], project.rocky_dir, None, _check_rocky),
        "dbt": RunSpec("dbt", project.dbt_dir / DB_FILE,
                       [str(DBT), "run", "--threads", "4", "--profiles-dir", str(project.dbt_dir),
                        "--project-dir", str(project.dbt_dir)],
                       project.dbt_dir, _dbt_env(project.dbt_dir / DB_FILE), _check_exit),
    }
    return [specs[c] for c in configs]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_workload(workload: str, n_models: int, rounds: int, configs: tuple[str, ...], work_dir: Path,
                 seed: int = 7) -> WorkloadResult:
    """Generate, seed, then interleave `rounds` rounds of every configuration, verifying every table."""
    order_rows = WORKLOADS[workload]
    project = generate(work_dir / f"{workload}-n{n_models}", n_models, order_rows, seed)
    log(f"{workload} N={n_models}: generated {project.n_models} models over {order_rows} order rows")
    seeded = seed_warehouse(project)
    logs = project.root / "logs"
    logs.mkdir()
    if "dbt" in configs:
        # dbt's steady state is a warm partial-parse cache (target/partial_parse.msgpack): build it untimed.
        _child([str(DBT), "parse", "--profiles-dir", str(project.dbt_dir), "--project-dir",
                str(project.dbt_dir)], "dbt parse")
    result = WorkloadResult(workload, project.n_models, order_rows, rounds)
    reference: dict[str, int] | None = None
    # raw-serial runs first in every round: its counts are the reference for every other configuration.
    ordered = ("raw-serial", *[c for c in configs if c != "raw-serial"])
    specs = run_specs(project, ordered)
    for rnd in range(rounds):
        for spec in specs:
            _fresh_db(seeded, spec.db)
            if spec.name == "rocky":
                _drop_rocky_state(project.rocky_dir)
            out, err = logs / f"{spec.name}-r{rnd}.out", logs / f"{spec.name}-r{rnd}.err"
            sample = measure(spec.argv, cwd=spec.cwd, env=spec.env, stdout=out, stderr=err,
                             config=spec.name, rnd=rnd)
            spec.check(sample, out, err)
            counts = count_rows(spec.db, project)
            if reference is None:
                reference = counts
                if len(counts) != project.n_models:
                    raise BenchError(f"raw-serial built {len(counts)} tables, expected {project.n_models}")
            elif counts != reference:
                diff = sorted(k for k in set(reference) | set(counts) if reference.get(k) != counts.get(k))
                examples = [(k, reference.get(k), counts.get(k)) for k in diff[:5]]
                raise BenchError(f"{spec.name} round {rnd}: row counts differ from raw-serial in "
                                 f"{len(diff)} tables, e.g. (table, raw-serial, {spec.name}): {examples}")
            spec.db.unlink(missing_ok=True)
            if spec.name in configs:
                result.samples.append(sample)
            log(f"{workload} N={n_models} round {rnd + 1}/{rounds} {spec.name}: {sample.wall_s:.2f}s "
                f"{sample.maxrss_kib / 1024:.0f}MB")
    result.tables_checked = len(reference or {})
    return result


def time_command(name: str, argv: list[str], budget_s: float, rounds: int, cwd: Path,
                 note: str = "") -> StartupResult:
    """Median-able timings of a short command; a non-zero exit is a failure, not a figure."""
    result = StartupResult(name, " ".join(argv), budget_s, note=note)
    err = cwd / f".startup-{name.replace(' ', '_')}.err"
    for rnd in range(rounds):
        sample = measure(argv, cwd=cwd, stderr=err, config=name, rnd=rnd)
        if sample.returncode != 0:
            raise BenchError(f"`{result.command}` exited {sample.returncode}: {err.read_text()[-2000:]}")
        result.samples.append(sample)
    err.unlink(missing_ok=True)
    return result


def run_startup(rounds: int, work_dir: Path) -> list[StartupResult]:
    """`rocky --help`, `rocky validate` on the playground and on a generated 10,000-model project."""
    results = [time_command("rocky --help", [str(ROCKY), "--help"], 0.15, rounds, work_dir)]
    playground = ROOT / "examples" / "playground" / "rocky.toml"
    if playground.exists():
        results.append(time_command("rocky validate (playground)",
                                    [str(ROCKY), "-c", str(playground), "validate"], 0.3, rounds,
                                    playground.parent))
    else:
        results.append(StartupResult("rocky validate (playground)", f"rocky -c {playground} validate", 0.3,
                                     note="skipped: examples/playground/rocky.toml does not exist yet"))
    big = generate(work_dir / "validate-n10000", 10_000, 1_000, targets=("rocky",))
    results.append(time_command("rocky validate (10,000 models)",
                                [str(ROCKY), "-c", str(big.rocky_toml), "validate"], 3.0, rounds,
                                big.rocky_dir))
    return results
