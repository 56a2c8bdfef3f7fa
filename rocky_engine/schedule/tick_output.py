"""The ``rocky tick`` result (CONTRACT section 6) and its exit code.

Exit 0: nothing was due, or every launched run succeeded (backoff skips, ``tick_in_progress`` and
``state_busy`` included). Exit 2: a launched run failed or came back partial. Exit 1: the tick could not
do its job (here: the spool could not be read, reported in ``errors[]``; config and state problems raise
before a document exists). Exit 130: SIGTERM/SIGINT stopped the tick (``interrupted``).
"""

from __future__ import annotations

from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.wire.tick import Counts, TickResult

#: Reasons worth a ``skipped[]`` entry even when another source of the same pipeline ran.
NOTABLE_REASONS = frozenset(
    {
        "disabled", "paused", "catchup_skipped", "failure_backoff", "partial_backoff",
        "history_unavailable", "in_flight", "dedup", "config_error",
    }
)


class TickOutput(TickResult, Result):
    """One tick's report (the document is ``rocky_engine.wire.tick.TickResult``)."""

    def finish(self) -> TickOutput:
        """Fill ``counts`` from the lists."""
        self.counts = Counts(
            evaluated=len(self.evaluated),
            due=sum(1 for e in self.evaluated if e.due),
            executed=len(self.executed),
            succeeded=sum(1 for e in self.executed if e.outcome == "success"),
            partial=sum(1 for e in self.executed if e.outcome == "partial"),
            failed=sum(1 for e in self.executed if e.outcome == "failure"),
            skipped=len(self.skipped),
        )
        return self

    def exit_code(self) -> int:
        if self.errors:
            return 1
        if self.interrupted:
            return 130
        if any(e.outcome != "success" for e in self.executed):
            return 2
        return 0

    def render_table(self) -> str:
        head = f"tick at {self.now}{' (dry run)' if self.dry_run else ''}: "
        if self.tick_in_progress:
            return head + "another tick is in progress; skipped\n"
        c = self.counts
        head += (
            f"{c.evaluated} evaluated, {c.due} due, {c.executed} executed "
            f"({c.succeeded} ok, {c.partial} partial, {c.failed} failed), {c.skipped} skipped"
        )
        if self.lock_overridden:
            head += " [took over a wedged tick lock]"
        parts = [head + "\n"]
        if self.executed:
            rows = [
                [e.pipeline, e.source, e.logical_ts or "", e.outcome, str(e.exit_code), str(e.attempts)]
                for e in self.executed
            ]
            parts.append(
                render_rows(None, ["PIPELINE", "SOURCE", "LOGICAL_TS", "OUTCOME", "EXIT", "ATTEMPTS"], rows)
            )
        if self.skipped:
            rows = [
                [s.pipeline or "*", s.source or "tick", s.reason, s.resume_at or "",
                 "" if s.missed is None else str(s.missed)]
                for s in self.skipped
            ]
            parts.append(render_rows(None, ["PIPELINE", "SOURCE", "REASON", "RESUME_AT", "MISSED"], rows))
        parts.extend(f"error: {e}\n" for e in self.errors)
        return "\n".join(parts)

    def render_md(self) -> str:
        c = self.counts
        out = [
            f"**rocky tick** at {self.now}{' (dry run)' if self.dry_run else ''}: {c.executed} executed, "
            f"{c.failed} failed, {c.partial} partial, {c.skipped} skipped\n"
        ]
        if self.executed:
            out.append(
                md_table(
                    ["pipeline", "source", "outcome", "exit", "attempts"],
                    [
                        [e.pipeline, e.source, e.outcome, str(e.exit_code), str(e.attempts)]
                        for e in self.executed
                    ],
                )
            )
        if self.skipped:
            out.append(
                md_table(
                    ["pipeline", "source", "reason", "resume_at"],
                    [
                        [s.pipeline or "*", s.source or "tick", s.reason, s.resume_at or ""]
                        for s in self.skipped
                    ],
                )
            )
        out.extend(f"- error: {e}\n" for e in self.errors)
        return "\n".join(out)
