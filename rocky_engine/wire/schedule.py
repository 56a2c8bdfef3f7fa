"""The scheduler's documents: ``GET /api/v1/schedule``, and the two small files in ``.rocky/`` that one
process writes and others read.

The schedule document (seeds: "resident scheduler"): ``tick_lock`` free | held | wedged | never; each
scheduled pipeline's cron / after / freshness, the facts the reconciler stored about it and the backoff in
force; the ``submitted`` claims; and what only the server knows (``scheduler``: resident or not, poll
interval, last tick attempt). It validates against the published ``ScheduleStatusOutput`` (rocky-sdk):
``counts``, ``timezone``, per pipeline ``awaiting_first_anchor`` and ``catchup`` (every pipeline, cron or
not), ``throttle.kind``, ``last_attempt_outcome``; our own names (``throttle.reason``, ``last_outcome``,
``last_fire``, the top-level ``claims``) stay as extra fields.

The files: ``.rocky/tick.lock.heartbeat`` (who holds the tick lock; its mtime is the heartbeat, read by
the next tick, ``rocky doctor`` and the server) and ``.rocky/running/<submission_id>.json`` (which pid runs
a scheduled child, read by whoever recovers a crashed owner's claims).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published

TickLockState = Literal["free", "held", "wedged", "never"]


class TickLockStatus(WireModel):
    state: TickLockState
    #: whole seconds since the holder's last heartbeat (held or wedged only; published as a non-negative
    #: integer)
    heartbeat_age_seconds: int | None = None


class Throttle(WireModel):
    """The backoff in force after a failure or a partial."""

    reason: Literal["failure_backoff", "partial_backoff"] = published("kind")
    resume_at: str


class ScheduledPipeline(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"enabled", "paused", "consecutive_failures", "awaiting_first_anchor"}
    )

    pipeline: str
    enabled: bool
    paused: bool
    cron: str | None = None
    timezone: str | None = None
    #: the catch-up policy (``latest`` | ``skip``), written for every pipeline as upstream does
    catchup: str
    #: a cron no tick has anchored yet (the first sight anchors without firing): no ``next_fire_at`` yet,
    #: which is not "never fires"; false without a cron
    awaiting_first_anchor: bool = False
    after: list[str] = Field(default_factory=list)
    #: true when the schedule declares ``freshness = true``
    freshness: bool | None = None
    config_error: str | None = None
    last_evaluated_at: str | None = None
    last_fire: str | None = None
    last_fire_source: str | None = None
    #: the next cron occurrence after the last one accounted for (in the past: the timer is late)
    next_fire_at: str | None = None
    last_outcome: str | None = published("last_attempt_outcome", None)
    last_attempt_at: str | None = None
    consecutive_failures: int = 0
    throttle: Throttle | None = None


class SubmittedClaim(WireModel):
    """A claim whose child was started and has not been resolved yet."""

    claim_key: str
    pipeline: str
    source: str
    logical_ts: str | None = None
    submission_id: str
    state: str
    created_at: str
    attempts: int


class LastTick(WireModel):
    """The resident scheduler's last tick attempt."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"result"})

    at: str
    result: str | None
    duration_ms: int | None = None
    detail: str | None = None
    age_seconds: float


class ServerScheduler(WireModel):
    resident: bool
    poll_interval_seconds: float | None = None
    last_tick: LastTick | None = None


class ScheduleCounts(WireModel):
    """Roll-up counts over ``pipelines`` (the published ``ScheduleStatusCounts``)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"scheduled", "enabled", "config_errors", "in_flight", "overdue", "throttled"}
    )

    scheduled: int = 0
    enabled: int = 0
    config_errors: int = 0
    #: pipelines with a ``submitted`` claim
    in_flight: int = 0
    #: pipelines whose ``next_fire_at`` is earlier than ``now``
    overdue: int = 0
    #: pipelines inside a backoff window
    throttled: int = 0


class ScheduleStatus(WireModel):
    """What the state store and ``.rocky/`` say about the scheduler (``schedule/view.py``)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"pipelines", "claims", "counts"})

    #: the project timezone (``[schedule].timezone``, else UTC) cron occurrences resolve in
    timezone: str
    tick_lock: TickLockStatus
    counts: ScheduleCounts = Field(default_factory=ScheduleCounts)
    pipelines: list[ScheduledPipeline] = Field(default_factory=list)
    claims: list[SubmittedClaim] = Field(default_factory=list)
    #: the schedule cannot be resolved (an ``after`` cycle), or rocky.toml stopped loading
    config_error: str | None = None


class _Stamp(WireModel):
    """The head of the schedule document (a base of its own so that it is written first)."""

    version: str = __version__
    now: str


class ScheduleDocument(ScheduleStatus, _Stamp):
    """``GET /api/v1/schedule``: ``{version, now, timezone, tick_lock, counts, pipelines[], claims[],
    config_error?, scheduler}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "now", "pipelines", "claims", "counts", "scheduler"}
    )

    scheduler: ServerScheduler


class WedgedHolder(WireModel):
    """The process that still holds the flock of a tick lock some tick overrode: the one to restart."""

    pid: int | None = None
    hostname: str | None = None
    #: epoch seconds at which it took the lock
    acquired_at: float | None = None
    #: epoch seconds of its last heartbeat (the mtime the first override found; unknown when the file was
    #: already a released one, as an engine before this field left it)
    last_heartbeat_at: float | None = None
    #: epoch seconds of the first override
    overridden_at: float


class TickHeartbeat(WireModel):
    """``.rocky/tick.lock.heartbeat``. Read leniently: a torn or foreign file is a heartbeat of unknown
    holder (its age still counts)."""

    #: the process that wrote this heartbeat (and beats it while it ticks)
    pid: int | None = None
    hostname: str | None = None
    #: epoch seconds at which the writer took the lock
    acquired_at: float | None = None
    #: the writer took over a wedged lock (it ticks without the flock)
    overridden: bool | None = None
    #: written by the writer as it lets go (with mtime 0, so the heartbeat reads stale at once)
    released: bool | None = None
    #: after an override: the flock's holder, kept by every later override until the flock is free
    wedged: WedgedHolder | None = None


class RunningChild(WireModel):
    """``.rocky/running/<submission_id>.json``: a scheduled child that is (or was) running."""

    pid: int
    hostname: str
    pipeline: str
    started_at: str
