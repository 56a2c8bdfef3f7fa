"""Budget suites: the standalone bench scripts (dagster, tick, connector, server, replication-peers) as
workloads of run_bench.

Each script measures in its own process and, given `--json FILE`, writes one document of figures; this
module runs the script as a child (PYTHONDONTWRITEBYTECODE unset, like every timed child), reads the
document back into a `SuiteResult`, and renders it as a results.md section. Verdicts are computed when
rendering, from each figure's operator and limit, so `--render-only` re-evaluates them.
"""

from __future__ import annotations

import json
import shlex
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import BENCH_DIR, PY, ROOT, child_env, log, measure

#: workload name -> script in bench/ (each accepts --json FILE and --work-dir DIR)
SCRIPTS = {
    "dagster": "dagster_bench.py",
    "dagster-run": "dagster_run_bench.py",
    "tick": "tick_bench.py",
    "connector": "connector_bench.py",
    "server": "server_bench.py",
    "replication-peers": "replication_peers_bench.py",
    "dag": "dag_bench.py",
    "spark": "spark_bench.py",
}
#: the scripts that take --rounds (server_bench counts requests instead)
TAKES_ROUNDS = ("dagster", "dagster-run", "tick", "connector", "replication-peers", "dag", "spark")
_OPS = {"<=": float.__le__, "<": float.__lt__, ">=": float.__ge__, ">": float.__gt__}


@dataclass
class Figure:
    """One measured figure; `op` and `limit` make it a budget, an empty `op` makes it INFO."""

    name: str
    value: float
    unit: str  # "s", "ms", "/s", "x", "MB" or "" for a count
    op: str = ""
    limit: float | None = None
    samples: list[float] = field(default_factory=list)
    detail: str = ""

    def passed(self) -> bool | None:
        """True/False against the budget; None when the figure has no budget."""
        if not self.op or self.limit is None:
            return None
        return bool(_OPS[self.op](float(self.value), float(self.limit)))


@dataclass
class SuiteResult:
    """Everything one budget script measured, plus the command that ran it."""

    workload: str
    title: str
    method: str
    command: str = ""
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""  # the script died before writing figures: the section says so, as a FAIL

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SuiteResult:
        return cls(
            workload=str(doc["workload"]), title=str(doc["title"]), method=str(doc.get("method", "")),
            command=str(doc.get("command", "")),
            figures=[Figure(**f) for f in doc.get("figures", [])],
            notes=[str(n) for n in doc.get("notes", [])], error=str(doc.get("error", "")),
        )


def figure(name: str, samples: list[float], unit: str, op: str = "", limit: float | None = None,
           detail: str = "") -> Figure:
    """A figure whose value is the median of `samples`."""
    return Figure(name, statistics.median(samples), unit, op, limit, list(samples), detail)


def write(path: Path | None, result: SuiteResult) -> str:
    """The script side: write the JSON document (when asked) and return the Markdown section to print."""
    if path is not None:
        path.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
    return "\n".join(section(result))


def run_suite(name: str, work_dir: Path, rounds: int | None) -> SuiteResult:
    """Run bench/<script> as a child and read its figures.

    A budget miss is a figure, not an error. A script that dies without figures (an engine crash, say) is
    recorded as a failed section with its error, so the other workloads still run and results.md says why.
    """
    work = work_dir / name
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    doc = logs / "figures.json"
    doc.unlink(missing_ok=True)
    script = BENCH_DIR / SCRIPTS[name]
    # The child runs in the repository root, so the command recorded is exactly the one that ran.
    argv = [".venv/bin/python", f"bench/{script.name}", "--json", _rel(doc), "--work-dir", _rel(work)]
    if rounds is not None and name in TAKES_ROUNDS:
        argv += ["--rounds", str(rounds)]
    log(f"{name}: {shlex.join(argv)}")
    out, err = logs / "stdout.txt", logs / "stderr.txt"
    sample = measure([str(PY), *argv[1:]], cwd=ROOT, env=child_env(), stdout=out, stderr=err, config=name)
    try:
        result = SuiteResult.from_json(json.loads(doc.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        tail = err.read_text(errors="replace").strip().splitlines()[-1:] or [f"no figures ({exc})"]
        log(f"{name}: {script.name} exited {sample.returncode} without figures: {tail[0]}")
        result = SuiteResult(name, "not measured (crashed)",
                             f"`{script.name}` exited {sample.returncode} before writing its figures; its "
                             f"output is in `{_rel(logs)}/`.",
                             error=tail[0][:1000])
    result.command = shlex.join(argv)
    if not result.error:
        log(f"{name}: {len(result.figures)} figures in {sample.wall_s:.1f}s")
    return result


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "MB":
        return f"{value:.0f} MB"
    return f"{value:g}"


def _fmt_limit(limit: float, unit: str) -> str:
    """A budget as the issue states it: `5 s`, `300 ms`, `300/s`, `1.3x`, `0`."""
    sep = "" if unit in ("/s", "x", "") else " "
    return f"{limit:g}{sep}{unit}"


def _verdict(ok: bool | None) -> str:
    return "INFO" if ok is None else ("**PASS**" if ok else "**FAIL**")


def section(result: SuiteResult) -> list[str]:
    """The results.md section: method, command, a table of every figure, then one line per budget."""
    out = [
        f"### {result.workload}: {result.title}",
        "",
        result.method,
        "",
        f"Command: `{result.command}`" if result.command else "Command: (run standalone)",
        "",
    ]
    if result.error:
        return [*out, f"- **FAIL**: the measurement crashed: `{result.error}`", ""]
    out += [
        "| figure | value | min | max | runs | budget | verdict | detail |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for f in result.figures:
        lo = _fmt(min(f.samples), f.unit) if len(f.samples) > 1 else "-"
        hi = _fmt(max(f.samples), f.unit) if len(f.samples) > 1 else "-"
        budget = f"{f.op} {_fmt_limit(f.limit, f.unit)}" if f.op and f.limit is not None else "-"
        runs = str(len(f.samples)) if f.samples else "-"
        out.append(f"| {f.name} | {_fmt(f.value, f.unit)} | {lo} | {hi} | {runs} | {budget} | "
                   f"{_verdict(f.passed())} | {f.detail or '-'} |")
    out.append("")
    budgeted = [f for f in result.figures if f.passed() is not None]
    for f in budgeted:
        assert f.limit is not None
        out.append(f"- {f.name} {f.op} {_fmt_limit(f.limit, f.unit)}: {_fmt(f.value, f.unit)} "
                   f"{_verdict(f.passed())}")
    if not budgeted:
        out.append("- budgets: none measured")
    out += [f"- {note}" for note in result.notes]
    out.append("")
    return out
