"""Render benchmark results as Markdown: medians, ratios, and every budget with PASS/FAIL."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from harness import Sample, StartupResult, WorkloadResult

MB = 1024.0  # ru_maxrss is KiB


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


def render(workloads: list[WorkloadResult], startup: list[StartupResult], facts: dict[str, str],
           command: str) -> str:
    """The whole results.md document."""
    out = [
        "# Benchmark results",
        "",
        "Generated by `bench/run_bench.py`; see `bench/README.md` for the workloads and how to read this.",
        "",
        f"Command: `{command}`",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in facts.items()],
        "",
        "## Results",
        "",
        "Configurations: `raw-serial` = the generated statements one at a time on one DuckDB connection; "
        "`raw-2` = the same statements level by level with two in flight on two cursors of one connection "
        "(the physical limit on this machine); `rocky` = `rocky run --pipeline bench`; `dbt` = "
        "`dbt run --threads 4` (dbt-duckdb). Each run is a separate process started on a fresh copy of the "
        "same seeded warehouse; wall time includes interpreter start-up for every configuration.",
        "",
    ]
    for w in workloads:
        out += workload_section(w)
    if startup:
        out += startup_section(startup)
    return "\n".join(out).rstrip() + "\n"
