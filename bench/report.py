"""Render benchmark results as Markdown: medians, ratios, and every budget with PASS/FAIL."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drift_workload import DriftResult
from harness import Sample, StartupResult, WorkloadResult
from replication_workload import PassSample, ReplicationResult
from suites import SuiteResult, section

if TYPE_CHECKING:
    from results_store import BenchRun

MB = 1024.0  # ru_maxrss is KiB
#: machine-facts key under which a run records how its timed children handled bytecode
BYTECODE_FACT = "timed children"


@dataclass(frozen=True)
class Stat:
    """Medians and spread of one configuration's samples."""

    wall: float
    wall_min: float
    wall_max: float
    rss_mb: float
    runs: int


def stat(samples: list[Sample]) -> Stat:
    walls = [s.wall_s for s in samples]
    return Stat(statistics.median(walls), min(walls), max(walls),
                statistics.median(s.maxrss_kib for s in samples) / MB, len(samples))


def by_config(result: WorkloadResult) -> dict[str, Stat]:
    groups: dict[str, list[Sample]] = {}
    for s in result.samples:
        groups.setdefault(s.config, []).append(s)
    return {name: stat(samples) for name, samples in groups.items()}


def _verdict(ok: bool, applies: bool) -> str:
    if not applies:
        return "INFO"
    return "**PASS**" if ok else "**FAIL**"


def budget_lines(result: WorkloadResult, stats: dict[str, Stat]) -> list[str]:
    """The budgets of the issue, evaluated on this workload's medians."""
    rocky, raw2, dbt = stats.get("rocky"), stats.get("raw-2"), stats.get("dbt")
    serial = stats.get("raw-serial")
    lines: list[str] = []
    if rocky is None or raw2 is None:
        return ["- budgets: not evaluated (rocky or raw-2 was not measured)"]
    n = result.n_models
    if result.workload == "realistic":
        applies = n == 1000
        note = "" if applies else " (budget is set for N = 1000; informational here)"
        ratio = rocky.wall / raw2.wall
        lines.append(f"- rocky wall <= 1.15x raw-2: {ratio:.2f}x ({rocky.wall:.2f} s vs {raw2.wall:.2f} s) "
                     f"{_verdict(ratio <= 1.15, applies)}{note}")
        if dbt is not None:
            speed = dbt.wall / rocky.wall
            lines.append(f"- rocky >= 2.5x faster than dbt run --threads 4: {speed:.2f}x "
                         f"{_verdict(speed >= 2.5, applies)}{note}")
        else:
            lines.append("- rocky >= 2.5x faster than dbt: not measured (--skip-dbt)")
        limit = raw2.rss_mb + 100
        lines.append(f"- rocky peak RSS <= raw-2 + 100 MB: {rocky.rss_mb:.0f} MB vs limit {limit:.0f} MB "
                     f"{_verdict(rocky.rss_mb <= limit, applies)}{note}")
    else:
        per_model = (rocky.wall - raw2.wall) / n * 1000
        lines.append(f"- engine overhead <= 5 ms/model ((rocky - raw-2) / N): {per_model:.2f} ms "
                     f"{_verdict(per_model <= 5.0, True)}")
        if serial is not None:
            vs_serial = (rocky.wall - serial.wall) / n * 1000
            lines.append(f"  - for reference, against raw-serial: {vs_serial:.2f} ms/model")
        if dbt is not None:
            speed = dbt.wall / rocky.wall
            lines.append(f"- rocky >= 8x faster than dbt run --threads 4: {speed:.2f}x "
                         f"{_verdict(speed >= 8, True)}")
        else:
            lines.append("- rocky >= 8x faster than dbt: not measured (--skip-dbt)")
    return lines


def workload_section(result: WorkloadResult) -> list[str]:
    stats = by_config(result)
    raw2 = stats.get("raw-2")
    rocky = stats.get("rocky")
    out = [
        f"### {result.workload}: N = {result.n_models} models, {result.order_rows:,} order rows",
        "",
        f"{result.rounds} interleaved rounds; row counts of all {result.tables_checked} tables verified "
        "equal to raw-serial after every run.",
        "",
        "| config | median wall s | min s | max s | median peak RSS MB | wall / raw-2 | rocky speedup |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ("raw-serial", "raw-2", "rocky", "dbt"):
        st = stats.get(name)
        if st is None:
            continue
        ratio = f"{st.wall / raw2.wall:.2f}x" if raw2 else "-"
        speedup = f"{st.wall / rocky.wall:.2f}x" if rocky and name != "rocky" else "-"
        out.append(f"| {name} | {st.wall:.2f} | {st.wall_min:.2f} | {st.wall_max:.2f} | {st.rss_mb:.0f} | "
                   f"{ratio} | {speedup} |")
    out += ["", *budget_lines(result, stats), ""]
    return out


def startup_section(results: list[StartupResult]) -> list[str]:
    out = [
        "### startup and project loading",
        "",
        "| command | median s | min s | max s | median peak RSS MB | budget s | verdict |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        if not r.samples:
            out.append(f"| {r.name} | - | - | - | - | {r.budget_s} | SKIPPED: {r.note} |")
            continue
        st = stat(r.samples)
        verdict = _verdict(st.wall <= r.budget_s, True)
        out.append(f"| {r.name} | {st.wall:.3f} | {st.wall_min:.3f} | {st.wall_max:.3f} | {st.rss_mb:.0f} | "
                   f"{r.budget_s} | {verdict} |")
    out.append("")
    return out


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def replication_section(result: ReplicationResult) -> list[str]:
    """Second pass (the budget) and first pass of every configuration, medians over the rounds."""
    groups: dict[tuple[str, str], list[PassSample]] = {}
    for s in result.samples:
        groups.setdefault((s.config, s.phase), []).append(s)
    out = [
        f"### replication: {result.tables} tables x {result.rows:,} rows, incremental second pass over "
        f"+{result.new_rows / result.rows:.0%} ({result.new_rows} new rows per table)",
        "",
        f"{result.rounds} interleaved rounds. Each round and configuration starts from a fresh copy of the "
        "seeded file: first pass, then 1% new rows appended to every source table (untimed), then the timed "
        f"second pass. After every pass all {result.tables_verified} target tables were verified against "
        f"their source (equal row count, same set of ids): {result.verifications} verifications, all equal.",
        "",
        "| config | pass | median wall s | min s | max s | median in-process s | median peak RSS MB | "
        "wall / raw-sql |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    stats: dict[tuple[str, str], Stat] = {
        k: stat([Sample(p.config, p.round, p.wall_s, p.maxrss_kib, p.returncode) for p in v])
        for k, v in groups.items()
    }
    inproc = {k: _median([p.inproc_s for p in v]) for k, v in groups.items()}
    for phase in ("second", "first"):
        base = stats.get(("raw-sql", phase))
        for config in ("raw-sql", "raw-sql-2", "rocky"):
            st = stats.get((config, phase))
            if st is None:
                continue
            ip = inproc.get((config, phase))
            ratio = f"{st.wall / base.wall:.2f}x" if base else "-"
            out.append(f"| {config} | {phase} | {st.wall:.2f} | {st.wall_min:.2f} | {st.wall_max:.2f} | "
                       f"{'-' if ip is None else f'{ip:.2f}'} | {st.rss_mb:.0f} | {ratio} |")
    imports = _median([p.import_s for p in result.samples if p.config == "raw-sql"])
    out += [
        "",
        "`raw-sql` is the hand-written SQL (`INSERT INTO target SELECT * FROM source WHERE updated_at > "
        "(SELECT max(updated_at) FROM target)` per table; the first pass `CREATE TABLE ... AS SELECT *`) run "
        "statement by statement on one DuckDB connection in a child Python process; its wall time includes "
        f"Python start-up and `import duckdb` (median import {imports or 0:.2f} s). `raw-sql-2` runs the "
        "same statements two at a time on two cursors (reference only). In-process: for the SQL children, "
        "connect to close (the statements plus DuckDB's checkpoint on close); for rocky, the run's own "
        "`duration_ms` (start-up, imports and config loading excluded).",
        "",
        *replication_budget(stats, inproc),
        "",
    ]
    return out


def replication_budget(stats: dict[tuple[str, str], Stat], inproc: dict[tuple[str, str], float | None],
                       ) -> list[str]:
    rocky, raw = stats.get(("rocky", "second")), stats.get(("raw-sql", "second"))
    if rocky is None or raw is None:
        return ["- budget: not evaluated (rocky or raw-sql was not measured)"]
    ratio = rocky.wall / raw.wall
    lines = [f"- rocky incremental second pass <= 1.3x the hand-written SQL (both whole processes, wall): "
             f"{ratio:.2f}x ({rocky.wall:.2f} s vs {raw.wall:.2f} s) {_verdict(ratio <= 1.3, True)}"]
    raw_ip, rocky_ip = inproc.get(("raw-sql", "second")), inproc.get(("rocky", "second"))
    if raw_ip:
        lines.append(f"  - INFO: rocky whole process vs the SQL's in-process time: "
                     f"{rocky.wall / raw_ip:.2f}x ({rocky.wall:.2f} s vs {raw_ip:.2f} s)")
        if rocky_ip:
            lines.append(f"  - INFO: rocky's own duration_ms vs the SQL's in-process time: "
                         f"{rocky_ip / raw_ip:.2f}x ({rocky_ip:.2f} s vs {raw_ip:.2f} s)")
    two = stats.get(("raw-sql-2", "second"))
    if two:
        lines.append(f"  - INFO: against raw-sql-2 (two cursors): {rocky.wall / two.wall:.2f}x")
    first_rocky, first_raw = stats.get(("rocky", "first")), stats.get(("raw-sql", "first"))
    if first_rocky and first_raw:
        lines.append(f"- first pass (full copy; no budget): rocky {first_rocky.wall / first_raw.wall:.2f}x "
                     f"raw-sql ({first_rocky.wall:.2f} s vs {first_raw.wall:.2f} s) INFO")
    return lines


def drift_section(result: DriftResult) -> list[str]:
    out = [
        f"### drift: {result.rows:,}-row source drifting before every run (strategy {result.strategy})",
        "",
        "One table replicated by one pipeline; before every run after the first one drift is applied to the "
        "source; after every run source and target are compared exactly (same columns and types, equal "
        "row counts, `EXCEPT ALL` empty both ways over all columns). Each run is a whole `rocky run` "
        "process.",
        "",
        "| run | drift applied before the run | wall s | rocky duration ms | peak RSS MB | rows copied | "
        "drift actions | source rows | target rows | missing / extra | types equal | verdict |",
        "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | --- |",
    ]
    for r in result.runs:
        actions = ", ".join(r.actions) or "none"
        if r.actions != r.expected_actions:
            actions += f" (expected: {', '.join(r.expected_actions) or 'none'})"
        status = "" if r.status == "Success" else f" (status {r.status})"
        out.append(f"| {r.run} | {r.drift} | {r.wall_s:.2f} | {r.duration_ms} | {r.maxrss_kib / MB:.0f} | "
                   f"{r.rows_copied:,} | {actions} | {r.source_rows:,} | {r.target_rows:,} | "
                   f"{r.missing} / {r.extra} | {'yes' if r.types_equal else 'no'} | "
                   f"{_verdict(r.equal, True)}{status} |")
    passed = sum(1 for r in result.runs if r.equal)
    walls = [r.wall_s for r in result.runs[1:]]
    out += ["", f"- target exactly equal to the source after every run: {passed} of {len(result.runs)} runs "
            f"{_verdict(passed == len(result.runs) and bool(result.runs), True)}"]
    if walls:
        out.append(f"- drifting runs: median wall {statistics.median(walls):.2f} s, "
                   f"max {max(walls):.2f} s INFO")
    mismatched = [r.run for r in result.runs if r.actions != r.expected_actions]
    if mismatched:
        out.append(f"- drift actions differ from the expected ones in runs {mismatched} INFO")
    out.append("")
    return out


def _sections(workloads: Sequence[WorkloadResult], startup: Sequence[StartupResult],
              replication: Sequence[ReplicationResult], drift: Sequence[DriftResult],
              suites: Sequence[SuiteResult] = ()) -> list[str]:
    out: list[str] = []
    if workloads:
        out += [
            "Transformation workloads: `raw-serial` = the generated statements one at a time on "
            "one DuckDB connection; `raw-2` = the same statements level by level with two in flight on "
            "two cursors of one connection (the physical limit on this machine); `rocky` = "
            "`rocky run --pipeline bench`; `dbt` = `dbt run --threads 4` (dbt-duckdb). Each run is a "
            "separate process started on a fresh copy of the same seeded warehouse; wall time includes "
            "interpreter start-up for every configuration.",
            "",
        ]
    for w in workloads:
        out += workload_section(w)
    for r in replication:
        out += replication_section(r)
    for d in drift:
        out += drift_section(d)
    for s in suites:
        out += section(s)
    if startup:
        out += startup_section(list(startup))
    return out


def _fact_lines(facts: dict[str, str]) -> list[str]:
    lines = [f"- {k}: {v}" for k, v in facts.items()]
    if BYTECODE_FACT not in facts:
        lines.append(f"- {BYTECODE_FACT}: not recorded (measured before the bench unset "
                     "PYTHONDONTWRITEBYTECODE for its timed children, which may have compiled sources on the "
                     "fly)")
    return lines


def earlier_section(run: BenchRun) -> list[str]:
    """Parts of an earlier run that this one did not measure again, with that run's machine facts."""
    return [
        "## Kept from an earlier run",
        "",
        f"Command: `{run.command}` (these sections were not measured again by the run above; `--merge`)",
        "",
        *_fact_lines(run.facts),
        "",
        *_sections(run.workloads, run.startup, run.replication, run.drift, run.suites),
    ]


def render(workloads: list[WorkloadResult], startup: list[StartupResult], facts: dict[str, str],
           command: str, *, replication: Sequence[ReplicationResult] = (), drift: Sequence[DriftResult] = (),
           suites: Sequence[SuiteResult] = (), earlier: Sequence[BenchRun] = ()) -> str:
    """The whole results.md document."""
    out = [
        "# Benchmark results",
        "",
        "Generated by `bench/run_bench.py`; see `bench/README.md` for the workloads and how to read this.",
        "",
        f"Command: `{command}`",
        "",
        *(["Every timed child process of this run (rocky, dagster, the raw SQL runners, dbt) ran with "
           "PYTHONDONTWRITEBYTECODE unset, after `compileall` of rocky_engine and dagster_rocky, because an "
           "installed rocky has its .pyc files; this machine sets PYTHONDONTWRITEBYTECODE=1, which would "
           "otherwise time the byte-compiler. Sections kept from an earlier run state their own conditions "
           "in their machine facts.", ""] if BYTECODE_FACT in facts else []),
        "## Machine",
        "",
        *_fact_lines(facts),
        "",
        "## Results",
        "",
    ]
    out += _sections(workloads, startup, replication, drift, suites)
    for run in earlier:
        out += earlier_section(run)
    return "\n".join(out).rstrip() + "\n"
