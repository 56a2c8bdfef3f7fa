"""The ``rocky tick`` JSON document (CONTRACT section 6) and its exit code.

Exit 0: nothing was due, or every launched run succeeded (backoff skips, ``tick_in_progress`` and
``state_busy`` included). Exit 2: a launched run failed or came back partial. Exit 1: the tick could not
do its job (here: the spool could not be read, reported in ``errors[]``; config and state problems raise
before a document exists). Exit 130: SIGTERM/SIGINT stopped the tick (``interrupted``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.output import Result, WireModel, md_table, render_rows

Reason = Literal[
    "due",
    "not_due",
    "disabled",
    "paused",
    "catchup_skipped",
    "failure_backoff",
    "partial_backoff",
    "superseded",
    "history_unavailable",
    "in_flight",
    "dedup",
    "tick_in_progress",
    "state_busy",
    "config_error",
]
#: Reasons worth a ``skipped[]`` entry even when another source of the same pipeline ran.
NOTABLE_REASONS = frozenset(
    {
        "disabled", "paused", "catchup_skipped", "failure_backoff", "partial_backoff",
        "history_unavailable", "in_flight", "dedup", "config_error",
    }
)


class SourceEntry(WireModel):
    """One demand source of one pipeline at this tick."""

    source: str
    reason: Reason
    resume_at: str | None = None
    missed: int | None = None
    #: a human hint (the config error, the upstream still waited on); optional
    detail: str | None = None


class Evaluated(WireModel):
    pipeline: str
    due: bool
    due_source: str | None = None
    logical_ts: str | None = None
    sources: list[SourceEntry] = Field(default_factory=list)
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"sources"})


class Executed(WireModel):
    pipeline: str
    source: str
    logical_ts: str | None
    submission_id: str
    exit_code: int | None
    outcome: Literal["success", "partial", "failure"]
    attempts: int
    #: present (true) only when timeout_minutes stopped the run
    timed_out: bool | None = None
    #: the incident bundle written for a failure/partial
    incident: str | None = None
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"logical_ts", "exit_code"})


class Skipped(WireModel):
    pipeline: str
    source: str
    reason: Reason
    resume_at: str | None = None
    missed: int | None = None
    detail: str | None = None


class Counts(WireModel):
    evaluated: int = 0
    due: int = 0
    executed: int = 0
    succeeded: int = 0
    partial: int = 0
    failed: int = 0
    skipped: int = 0
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"evaluated", "due", "executed", "succeeded", "partial", "failed", "skipped"}
    )


class TickOutput(Result):
    """One tick's report."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"tick_in_progress", "lock_overridden", "evaluated", "executed", "skipped", "counts"}
    )

    version: str = __version__
    command: str = "tick"
    dry_run: bool
    now: str
    duration_ms: int = 0
    tick_in_progress: bool = False
    lock_overridden: bool = False
    evaluated: list[Evaluated] = Field(default_factory=list)
    executed: list[Executed] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    #: what kept the tick from doing its whole job (an unreadable spool: exit 1)
    errors: list[str] = Field(default_factory=list)
    #: present (true) once a stop was requested (SIGTERM/SIGINT, server drain): no new work was started
    interrupted: bool | None = None

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
                [s.pipeline, s.source, s.reason, s.resume_at or "", "" if s.missed is None else str(s.missed)]
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
                    [[s.pipeline, s.source, s.reason, s.resume_at or ""] for s in self.skipped],
                )
            )
        out.extend(f"- error: {e}\n" for e in self.errors)
        return "\n".join(out)
