"""The ``rocky run`` result (its document is ``rocky_engine.wire.run.RunResult``) and its exit-code
rules."""

from __future__ import annotations

from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.wire.run import RunResult, RunStatus


class RunOutput(RunResult, Result):
    """The result of one ``rocky run``: the wire document plus its exit code and rendering."""

    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.status == "PartialFailure":
            return 2
        if self.status == "Failure":
            return 1
        return 0

    def render_table(self) -> str:
        lines = [
            f"run {self.run_id or ''}  status={self.status}  duration={self.duration_ms / 1000:.2f}s  "
            f"materialized={self.tables_copied}  failed={self.tables_failed}"
            + ("  INTERRUPTED" if self.interrupted else "")
        ]
        if self.skipped_by_run_id:
            lines.append(f"skipped: idempotency key already handled by {self.skipped_by_run_id}")
        rows = [
            [
                ".".join(m.asset_key),
                m.metadata.strategy,
                "" if m.rows_copied is None else str(m.rows_copied),
                f"{m.duration_ms}",
            ]
            for m in self.materializations
        ]
        if rows:
            lines.append(render_rows(None, ["table", "strategy", "rows", "ms"], rows))
        if self.errors:
            lines.append(
                render_rows(
                    "errors",
                    ["table", "kind", "error"],
                    [[".".join(e.asset_key), e.failure_kind, e.error] for e in self.errors],
                )
            )
        if self.contained:
            lines.append(
                render_rows(
                    "withheld (upstream failed)",
                    ["model", "blocked by"],
                    [[c.model, ", ".join(c.blocked_by)] for c in self.contained],
                )
            )
        # A quality run is all checks: list every one; elsewhere only the failures are worth a line.
        show_all = self.pipeline_type == "quality"
        check_rows = [
            [".".join(r.asset_key), c.name, "passed" if c.passed else "FAILED", c.severity]
            for r in self.check_results
            for c in r.checks
            if show_all or not c.passed
        ]
        if check_rows:
            title = "checks" if show_all else "failed checks"
            lines.append(render_rows(title, ["table", "check", "result", "severity"], check_rows))
        return "\n".join(lines) + "\n"

    def render_md(self) -> str:
        head = f"**rocky run** `{self.run_id or ''}`: {self.status} in {self.duration_ms / 1000:.2f}s\n\n"
        rows = [
            [".".join(m.asset_key), m.metadata.strategy, str(m.rows_copied or ""), str(m.duration_ms)]
            for m in self.materializations
        ]
        body = md_table(["table", "strategy", "rows", "ms"], rows) if rows else ""
        errs = "".join(f"- `{'.'.join(e.asset_key)}` ({e.failure_kind}): {e.error}\n" for e in self.errors)
        return head + body + ("\n" + errs if errs else "")


def derive_status(succeeded: int, problems: int) -> RunStatus:
    """No problem: Success; progress with a problem: PartialFailure; a problem and no progress: Failure."""
    if problems == 0:
        return "Success"
    return "PartialFailure" if succeeded > 0 else "Failure"
