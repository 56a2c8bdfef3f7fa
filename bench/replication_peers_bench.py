"""PostgreSQL -> DuckDB replication against its peers and the direct paths (issue 20).

A real PostgreSQL 15 server (`replication_peers_pg.py`) holds two sources: one table of 2,000,000 rows
(`big`) and 200 tables of 10,000 rows (`small`), ten columns each. Every configuration of
`replication_peers_configs.py` (rocky, dlt with connectorx and with pyarrow, Sling, and the direct paths)
copies a source into its own empty DuckDB file as a child process: the first pass (full), then, after 1%
new rows were appended to every source table (untimed), the second pass (incremental on `updated_at`).
Afterwards the appended rows are deleted again, so every configuration reads the same source. Rounds are
interleaved (round 1 of every configuration, then round 2, ...); figures are medians of whole processes,
spawn to reap, with peak RSS from wait4 (which covers the child's own children: Sling's duckdb CLI).

After every pass `replication_peers_verify.py` compares each target with its source: row count, sum of ids,
the exact sum of the numeric column, the sum of the timestamptz instants (the source databases default to
America/New_York), the count of NULLs and the other columns. A rocky pass that fails verification stops the
bench; a peer or direct path that fails is reported as such (and kept out of the "fastest" comparisons).

Budgets (issue 20): the 2M-row first pass at most 1.2x the fastest direct path measured in the same run and
faster than every peer; the incremental pass the fastest of all configurations; with 200 small tables faster
than every peer on both passes.

Usage: `.venv/bin/python bench/replication_peers_bench.py [--rounds 3] [--small-rounds 1]
[--variants big,small] [--configs rocky,cx,...] [--profile] [--work-dir DIR] [--json FILE]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BENCH_DIR, PY, BenchError, _child, log, measure
from replication_peers_configs import (
    CONFIGS,
    DB_FILE,
    DEFAULT,
    ROCKY_LIBRARIES,
    ROCKY_VENV,
    Config,
    command,
    fresh,
    missing_tools,
    write_project,
)
from replication_peers_pg import BIG, SMALL, Source, SourceServer
from replication_peers_profile import profile_rocky
from suites import Figure, SuiteResult, figure, write

VARIANTS = {"big": BIG, "small": SMALL}
PIPELINES = {"big": "big", "small": "small"}
PHASES = ("first", "second")


@dataclass
class Passes:
    """Every timed pass of one configuration on one variant."""

    wall: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    rss_mb: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    #: user + system CPU seconds of the pass (what it costs on an idle machine: the wall time minus waits)
    cpu_s: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    failures: list[str] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)


def _tail(path: Path) -> str:
    """The line that says what broke: the last exception/error line, else the last line."""
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    errors = [ln for ln in lines if "Error" in ln or "Exception" in ln or "fatal" in ln.lower()]
    return (errors or lines or ["(no output)"])[-1].strip()[:300]


#: a pass still running after this long has hung (Sling 1.4.11 once stopped on the 200th stream of the
#: small variant with its duckdb CLI idle); `timeout` kills it and the configuration is reported as failed
PASS_TIMEOUT_S = 1800


def _check(config: Config, source: Source, phase: str, rc: int, out: Path, err: Path) -> None:
    if rc == 124:
        raise BenchError(f"{config.name} {phase} pass hung: killed after {PASS_TIMEOUT_S} s ({err})")
    if rc != 0:
        raise BenchError(f"{config.name} {phase} pass exited {rc}: {_tail(err)} {_tail(out)}")
    if config.kind != "rocky":
        return
    try:
        doc = json.loads(out.read_text())
    except ValueError as exc:
        raise BenchError(f"rocky {phase} pass printed no JSON ({out}): {exc}") from exc
    if doc.get("status") != "Success" or doc.get("tables_copied") != len(source.tables):
        errors = json.dumps(doc.get("errors", []))[:500]
        raise BenchError(f"rocky {phase} pass: status {doc.get('status')!r}, {doc.get('tables_copied')} of "
                         f"{len(source.tables)} tables copied, errors {errors}")


def _verify(server: SourceServer, source: Source, work: Path) -> dict[str, object]:
    argv = [str(PY), str(BENCH_DIR / "replication_peers_verify.py"), server.uri(source.dbname),
            str(work / DB_FILE), str(work / "pairs.json")]
    doc: dict[str, object] = json.loads(_child(argv, f"verifying {work}"))
    return doc


def run_variant(variant: str, configs: list[Config], rounds: int, server: SourceServer,
                work_dir: Path) -> dict[str, Passes]:
    source = VARIANTS[variant]
    results = {c.name: Passes() for c in configs}
    for config in configs:
        write_project(config, source, server, PIPELINES[variant], work_dir / variant / config.name)
    for rnd in range(rounds):
        for config in configs:
            passes = results[config.name]
            if passes.failures and config.kind != "rocky":
                continue  # a peer that broke once is not timed again
            work = work_dir / variant / config.name
            fresh(work)
            try:
                for phase in PHASES:
                    if phase == "second":
                        server.append(source)
                    spec = command(config, source, server, PIPELINES[variant], phase, work)
                    out, err = work / f"{phase}-r{rnd}.out", work / f"{phase}-r{rnd}.err"
                    argv = ["timeout", "--kill-after=10", str(PASS_TIMEOUT_S), *spec.argv]
                    sample = measure(argv, cwd=spec.cwd, env=spec.env, stdout=out, stderr=err,
                                     config=config.name, rnd=rnd)
                    _check(config, source, phase, sample.returncode, out, err)
                    doc = _verify(server, source, work)
                    bad = doc["mismatches"]
                    if bad:
                        raise BenchError(f"{config.name} {phase} pass round {rnd + 1}: "
                                         f"{len(bad)} of {doc['tables']} tables differ, e.g. {bad[:2]}")
                    passes.wall[phase].append(sample.wall_s)
                    passes.rss_mb[phase].append(sample.maxrss_kib / 1024)
                    passes.cpu_s[phase].append(sample.cpu_s)
                    passes.types = dict(doc["types"])  # type: ignore[call-overload]
                    log(f"{variant} round {rnd + 1}/{rounds} {config.name} {phase}: {sample.wall_s:.2f}s "
                        f"{sample.maxrss_kib / 1024:.0f}MB, verified")
            except BenchError as exc:
                if config.kind == "rocky":
                    raise
                passes.failures.append(str(exc))
                log(f"{variant} {config.name}: FAILED: {exc}")
            finally:
                server.reset(source)
        if variant == "big":
            _library_floor(results, rnd, work_dir)
    return results


#: the pseudo-configuration under which the library floor's samples are kept (not a configuration)
FLOOR = "rocky's libraries"


def _library_floor(results: dict[str, Passes], rnd: int, work_dir: Path) -> None:
    """Time `import duckdb, pyarrow, psycopg, pydantic` in rocky's venv, once per round, beside the passes.

    What no rocky pass can go below however lean its own code: DESIGN.md chose these libraries (psycopg as
    the PostgreSQL driver, pydantic for the config and wire models, pyarrow for the copy's batches) and a
    replication into DuckDB imports all four. Compared with the incremental pass of the fastest other
    configuration, it says whether that budget is reachable at all with them.
    """
    argv = [str(ROCKY_VENV / "bin" / "python"), "-c", "import " + ", ".join(ROCKY_LIBRARIES)]
    sample = measure(argv, cwd=work_dir, config=FLOOR, rnd=rnd)
    if sample.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {sample.returncode}")
    floor = results.setdefault(FLOOR, Passes())
    floor.wall["second"].append(sample.wall_s)
    floor.cpu_s["second"].append(sample.cpu_s)
    floor.rss_mb["second"].append(sample.maxrss_kib / 1024)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _fastest(results: dict[str, Passes], phase: str, kinds: tuple[str, ...]) -> tuple[str, float] | None:
    ok = [(name, _median(p.wall[phase])) for name, p in results.items()
          if name in CONFIGS and CONFIGS[name].kind in kinds and not p.failures and p.wall[phase]]
    return min(ok, key=lambda x: x[1]) if ok else None


def figures_for(variant: str, results: dict[str, Passes]) -> list[Figure]:
    source = VARIANTS[variant]
    what = f"{len(source.tables)} x {source.rows:,}" if len(source.tables) > 1 else f"{source.rows:,} rows"
    figs: list[Figure] = []
    for name, passes in results.items():
        if name == FLOOR:
            continue
        for phase in PHASES:
            if not passes.wall[phase]:
                continue
            rss = _median(passes.rss_mb[phase])
            detail = (f"peak RSS {rss:.0f} MB, CPU {_median(passes.cpu_s[phase]):.2f} s (medians); verified")
            figs.append(figure(f"{variant} {phase} pass ({what}): {name}", passes.wall[phase], "s",
                               detail=detail))
    figs += _floor_figures(variant, results)
    rocky = results.get("rocky")
    if rocky is None or not rocky.wall["first"]:
        return figs
    # (phase, against, kinds, op, limit): the budgets; an empty op is INFO
    others = {k: v for k, v in results.items() if k != "rocky"}
    rules = {
        "big": [("first", "fastest direct path", ("direct",), "<=", 1.2),
                ("first", "fastest peer", ("peer",), "<", 1.0),
                ("second", "fastest other configuration", ("peer", "direct"), "<=", 1.0),
                ("second", "fastest peer", ("peer",), "", None),
                ("second", "fastest direct path", ("direct",), "", None)],
        "small": [("first", "fastest peer", ("peer",), "<", 1.0),
                  ("second", "fastest peer", ("peer",), "<", 1.0),
                  ("first", "fastest direct path", ("direct",), "", None),
                  ("second", "fastest direct path", ("direct",), "", None)],
    }[variant]
    for phase, against, kinds, op, limit in rules:
        best = _fastest(others, phase, kinds)
        mine = _median(rocky.wall[phase])
        if best is not None and rocky.wall[phase]:
            figs.append(Figure(f"{variant} {phase} pass: rocky / {against}", mine / best[1], "x", op, limit,
                               detail=f"rocky {mine:.2f} s / {best[0]} {best[1]:.2f} s"))
    return figs


def _floor_figures(variant: str, results: dict[str, Passes]) -> list[Figure]:
    """INFO: the library floor's CPU against the CPU of the fastest other configuration's incremental pass."""
    floor = results.get(FLOOR)
    best = _fastest({k: v for k, v in results.items() if k != "rocky"}, "second", ("peer", "direct"))
    if floor is None or not floor.cpu_s["second"]:
        return []
    mine = _median(floor.cpu_s["second"])
    figs = [figure(f"{variant}: CPU of `import {', '.join(ROCKY_LIBRARIES)}` in rocky's venv (no work)",
                   floor.cpu_s["second"], "s", detail=f"wall {_median(floor.wall['second']):.2f} s (median)")]
    if best is not None:
        theirs = _median(results[best[0]].cpu_s["second"])
        detail = (f"imports alone {mine:.2f} s / {best[0]}'s whole second pass {theirs:.2f} s; above 1x no "
                  "rocky pass on these libraries can be faster")
        figs.append(Figure(f"{variant} second pass: rocky's library floor / {best[0]}'s whole pass, CPU",
                           mine / theirs, "x", detail=detail))
    return figs


def table(variant: str, results: dict[str, Passes]) -> list[str]:
    """The issue's table: one row per configuration, medians of both passes, peak RSS."""
    source = VARIANTS[variant]
    out = [f"#### {variant}: {len(source.tables)} table(s) x {source.rows:,} rows, +{source.new_rows:,} "
           "rows per table before the second pass", "",
           "| configuration | first pass (full) | second pass (+1%, incremental) | peak RSS first / second |"
           " amount, updated_at in the target |", "|---|---:|---:|---:|---|"]
    for name, p in sorted(results.items(), key=lambda kv: _median(kv[1].wall["first"]) if kv[1].wall["first"]
                          else float("inf")):
        if name == FLOOR:
            continue
        cfg = CONFIGS[name]
        if p.failures:
            out.append(f"| {cfg.label} | failed | failed | - | {p.failures[0][:200]} |")
            continue
        types = f"{p.types.get('amount', '?')}, {p.types.get('updated_at', '?')}"
        out.append(f"| {cfg.label} | {_median(p.wall['first']):.2f} s | {_median(p.wall['second']):.2f} s | "
                   f"{_median(p.rss_mb['first']):.0f} / {_median(p.rss_mb['second']):.0f} MB | {types} |")
    return [*out, ""]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the 2M-row table (default 3)")
    p.add_argument("--small-rounds", type=int, default=None,
                   help="rounds of the 200-table variant (default 1: Sling alone takes ~10 min per round)")
    p.add_argument("--variants", default="big,small")
    p.add_argument("--configs", default="", help=f"comma separated from {', '.join(CONFIGS)} (default: "
                   "all for big, the non-parallel ones for small)")
    p.add_argument("--profile", action="store_true",
                   help="also profile one rocky first pass of the big table with py-spy (top frames)")
    p.add_argument("--work-dir", default=str(BENCH_DIR / "work" / "replication-peers"))
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    wanted = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [v for v in variants if v not in VARIANTS] + [c for c in wanted if c not in CONFIGS]
    if unknown:
        print(f"unknown variant or configuration: {', '.join(unknown)}", file=sys.stderr)
        return 2
    names = {n for v in variants for n in (wanted or DEFAULT[v])}
    missing = missing_tools(names)
    if missing:
        print(f"replication-peers: {', '.join(missing)} not found: run `bash bench/setup_peers.sh` "
              "(make bench does)", file=sys.stderr)
        return 2
    work_dir = Path(args.work_dir).resolve()
    server = SourceServer()
    result = SuiteResult("replication-peers", "PostgreSQL -> DuckDB against dlt, Sling and the direct paths "
                         "(issue 20)", method=__doc__.split("\n\n", 1)[1].split("\n\nUsage:")[0])
    tables: list[str] = []
    try:
        server.start()
        result.notes.append(f"PostgreSQL {server.version()} on 127.0.0.1 (fsync off, as the tests run it)")
        for variant in variants:
            log(f"replication-peers: seeding {variant}")
            server.seed(VARIANTS[variant])
            names = [c for c in (wanted or DEFAULT[variant])]
            rounds = args.rounds if variant == "big" else (args.small_rounds or 1)
            results = run_variant(variant, [CONFIGS[n] for n in names], rounds, server, work_dir)
            result.figures += figures_for(variant, results)
            tables += table(variant, results)
            result.notes += [f"{variant} {n}: FAILED, not timed further: {p.failures[0][:300]}"
                             for n, p in results.items() if p.failures]
            result.notes.append(f"{variant}: {rounds} interleaved round(s)")
            # Written after each variant too, so a crash in the next one keeps what was measured.
            (work_dir / "table.md").write_text("\n".join(tables))
            write(args.json, result)
        if args.profile:
            if "big" not in variants:
                server.seed(BIG)
            result.notes += profile_rocky(server, BIG, work_dir / "profile")
    finally:
        server.stop()
    (work_dir / "table.md").write_text("\n".join(tables))
    print("\n".join(tables))
    print(write(args.json, result))
    return 0 if all(f.passed() is not False for f in result.figures) else 1


if __name__ == "__main__":
    sys.exit(main())
