"""The ``rocky tick`` document (CONTRACT section 6)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

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
    "spool_unreadable",
]
Outcome = Literal["success", "partial", "failure"]


class SourceEntry(WireModel):
    """One demand source of one pipeline at this tick."""

    source: str
    reason: Reason
    resume_at: str | None = None
    missed: int | None = None
    #: a human hint (the config error, the upstream still waited on); optional
    detail: str | None = None


class Evaluated(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"sources"})

    pipeline: str
    due: bool
    due_source: str | None = None
    logical_ts: str | None = None
    sources: list[SourceEntry] = Field(default_factory=list)


class Executed(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"logical_ts", "exit_code"})

    pipeline: str
    source: str
    logical_ts: str | None
    submission_id: str
    exit_code: int | None
    outcome: Outcome
    attempts: int
    #: present (true) only when timeout_minutes stopped the run
    timed_out: bool | None = None
    #: the incident bundle written for a failure/partial
    incident: str | None = None


class Skipped(WireModel):
    """One suppressed demand. A whole-tick skip (``tick_in_progress``, ``state_busy``) has neither
    ``pipeline`` nor ``source``; ``spool_unreadable`` has ``source: "webhook"`` and no ``pipeline`` (the
    published shape, rocky-sdk ``SkippedDemandOutput``)."""

    pipeline: str | None = None
    source: str | None = None
    reason: Reason
    resume_at: str | None = None
    missed: int | None = None
    detail: str | None = None


class Counts(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"evaluated", "due", "executed", "succeeded", "partial", "failed", "skipped"}
    )

    evaluated: int = 0
    due: int = 0
    executed: int = 0
    succeeded: int = 0
    partial: int = 0
    failed: int = 0
    skipped: int = 0


class TickResult(WireModel):
    """One tick's report."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "duration_ms", "tick_in_progress", "lock_overridden", "evaluated", "executed",
         "skipped", "counts"}
    )

    version: str = __version__
    command: Literal["tick"] = "tick"
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
