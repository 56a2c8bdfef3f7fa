"""The scheduler's documents: ``GET /api/v1/schedule``, and the two small files in ``.rocky/`` that one
process writes and others read.

The schedule document (seeds: "resident scheduler"): ``tick_lock`` free | held | wedged | never; each
scheduled pipeline's cron / after / freshness, the facts the reconciler stored about it and the backoff in
force; the ``submitted`` claims; and what only the server knows (``scheduler``: resident or not, poll
interval, last tick attempt).

The files: ``.rocky/tick.lock.heartbeat`` (who holds the tick lock; its mtime is the heartbeat, read by
the next tick, ``rocky doctor`` and the server) and ``.rocky/running/<submission_id>.json`` (which pid runs
a scheduled child, read by whoever recovers a crashed owner's claims).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

TickLockState = Literal["free", "held", "wedged", "never"]


class TickLockStatus(WireModel):
    state: TickLockState
    #: seconds since the holder's last heartbeat (held or wedged only)
    heartbeat_age_seconds: float | None = None


class Throttle(WireModel):
    """The backoff in force after a failure or a partial."""

    reason: Literal["failure_backoff", "partial_backoff"]
    resume_at: str


class ScheduledPipeline(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"enabled", "paused", "consecutive_failures"})

    pipeline: str
    enabled: bool
    paused: bool
    cron: str | None = None
    timezone: str | None = None
    catchup: str | None = None
    after: list[str] = Field(default_factory=list)
    #: true when the schedule declares ``freshness = true``
    freshness: bool | None = None
    config_error: str | None = None
    last_evaluated_at: str | None = None
    last_fire: str | None = None
    last_fire_source: str | None = None
    #: the next cron occurrence after the last one accounted for (in the past: the timer is late)
    next_fire_at: str | None = None
    last_outcome: str | None = None
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


class ScheduleStatus(WireModel):
    """What the state store and ``.rocky/`` say about the scheduler (``schedule/view.py``)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"pipelines", "claims"})

    tick_lock: TickLockStatus
    pipelines: list[ScheduledPipeline] = Field(default_factory=list)
    claims: list[SubmittedClaim] = Field(default_factory=list)
    #: the schedule cannot be resolved (an ``after`` cycle), or rocky.toml stopped loading
    config_error: str | None = None


class _Stamp(WireModel):
    """The head of the schedule document (a base of its own so that it is written first)."""

    version: str = __version__
    now: str


class ScheduleDocument(ScheduleStatus, _Stamp):
    """``GET /api/v1/schedule``: ``{version, now, tick_lock, pipelines[], claims[], config_error?,
    scheduler}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "now", "pipelines", "claims", "scheduler"})

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
