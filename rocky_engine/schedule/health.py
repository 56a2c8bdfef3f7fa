"""Scheduler health for ``rocky doctor --check scheduler`` and the scheduler section of ``rocky brief``.

Reads only the filesystem (``.rocky/``) and the state store, never the warehouse, so it works offline and
covers both ``rocky tick`` timers and ``rocky serve --scheduler``:

- Critical: ``.rocky/tick.lock`` is held but its heartbeat is stale (a wedged reconciler; restart the
  process that holds it);
- Warning: no tick has evaluated any schedule for more than twice the shortest cron interval (the timer
  looks dead), or none ever has; or the last evaluation is dated in the future (a tick ran at a future
  ``--now`` or the clock went back: its cron anchors and backoffs are dated ahead too, ``clock.py``);
- otherwise healthy. Without any ``[pipeline.*.schedule]`` the check does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from rocky_engine.errors import RockyError
from rocky_engine.schedule.clock import ahead_of
from rocky_engine.schedule.incidents import INCIDENTS_DIR, IncidentDirRefused, list_incidents
from rocky_engine.schedule.tick_lock import (
    STALE_AFTER_SECONDS,
    TickLockInfo,
    age_text,
    holder_text,
    inspect_tick_lock,
)
from rocky_engine.state._time import rfc3339, utc
from rocky_engine.wire.schedule import TickLockState

if TYPE_CHECKING:
    from rocky_engine.project import Project
    from rocky_engine.state.store import StateStore
    from rocky_engine.wire.brief import SchedulerSection

HealthStatus = Literal["healthy", "warning", "critical"]


@dataclass(frozen=True)
class SchedulerHealth:
    """The scheduler check's verdict and the facts behind it."""

    #: False when no pipeline declares a schedule (doctor stays silent)
    applicable: bool
    status: HealthStatus
    message: str
    tick_lock: TickLockState = "never"
    heartbeat_age_seconds: float | None = None
    last_evaluated_at: datetime | None = None
    shortest_interval_seconds: int | None = None
    suggestions: list[str] = field(default_factory=list)


def _shortest_interval(project: Project) -> timedelta | None:
    """The smallest cron interval of any valid, enabled schedule (else the project freshness budget)."""
    from rocky_engine.config.schedule_syntax import cron_problem
    from rocky_engine.schedule.demand import shortest_interval

    best: timedelta | None = None
    freshness = False
    for p in project.config.pipelines.values():
        sched = p.schedule
        if sched is None or not sched.enabled:
            continue
        freshness = freshness or sched.freshness
        if sched.cron and cron_problem(sched.cron) is None:
            gap = shortest_interval(sched.cron)
            best = gap if best is None else min(best, gap)
    lag = project.config.freshness.expected_lag_seconds
    if best is None and freshness and lag:
        best = timedelta(seconds=lag)
    return best


def scheduler_health(project: Project, now: datetime | None = None) -> SchedulerHealth:
    """Is the reconciler alive and unwedged?"""
    now = utc(now) if now is not None else datetime.now(UTC)
    if not any(p.schedule is not None for p in project.config.pipelines.values()):
        return SchedulerHealth(False, "healthy", "no pipeline declares a [schedule]; nothing to check")
    lock = inspect_tick_lock(project.dot_rocky, wall=now.timestamp)
    if lock.state == "wedged":
        return _wedged(project, lock)
    try:
        last = _last_evaluated(project)
    except RockyError as exc:
        return SchedulerHealth(
            True, "warning", f"cannot read the scheduler state: {exc}", tick_lock=lock.state,
            heartbeat_age_seconds=lock.heartbeat_age_seconds,
        )
    interval = _shortest_interval(project)
    seconds = int(interval.total_seconds()) if interval else None
    common: dict[str, Any] = {
        "tick_lock": lock.state,
        "heartbeat_age_seconds": lock.heartbeat_age_seconds,
        "last_evaluated_at": last,
        "shortest_interval_seconds": seconds,
    }
    if last is None:
        return SchedulerHealth(
            True,
            "warning",
            "no tick has evaluated any schedule yet: the timer looks dead or was never wired",
            suggestions=["run `rocky tick` from a one-minute cron or systemd timer (see docs/scheduling.md)"],
            **common,
        )
    ahead = ahead_of(last, now)
    if ahead is not None:
        return SchedulerHealth(
            True,
            "warning",
            f"the last tick evaluated at {rfc3339(last)}, {int(ahead.total_seconds())} s later than now "
            f"({rfc3339(now)}): a tick ran with a --now in the future, or this host's clock went back. The "
            "cron anchors and backoffs it stored are dated ahead too: cron slots up to then do not fire, "
            "and this check cannot tell a dead timer until then",
            suggestions=[
                "check the host clock (`timedatectl`, NTP) first",
                "if a `rocky tick --now` in the future wrote it, cron and backoff resume once the clock "
                f"passes {rfc3339(last)}; `rocky tick --dry-run` lists the pipelines it holds back (not_due, "
                "resume_at). Run future instants only with --dry-run",
            ],
            **common,
        )
    if interval is not None and now - last > 2 * interval:
        return SchedulerHealth(
            True,
            "warning",
            f"no tick has evaluated any schedule since {rfc3339(last)} (over twice the shortest interval, "
            f"{seconds} s): the timer looks dead",
            suggestions=["check the cron/systemd timer that runs `rocky tick` and its log"],
            **common,
        )
    state = "a tick is in progress" if lock.state == "held" else "the tick lock is free"
    return SchedulerHealth(True, "healthy", f"last tick evaluated at {rfc3339(last)}; {state}", **common)


def _wedged(project: Project, lock: TickLockInfo) -> SchedulerHealth:
    """Critical: name the process that holds the flock and the age of its own last heartbeat (after an
    override too: the overriding ticks have exited, and their heartbeat is not the holder's)."""
    holder = holder_text(lock.holder_pid, lock.holder_hostname)
    took = f", which took it at {rfc3339(_at(lock.holder_acquired_at))}" if lock.holder_acquired_at else ""
    message = (
        f"{project.dot_rocky / 'tick.lock'} is held by {holder}{took}, with a stale heartbeat "
        f"({age_text(lock.heartbeat_age_seconds)}, over {STALE_AFTER_SECONDS:.0f} s): the reconciler is "
        "wedged"
    )
    if lock.overridden_at is not None:
        message += f"; ticks override it since {rfc3339(_at(lock.overridden_at))}"
    suggestion = f"restart the process holding the tick lock ({holder})"
    if lock.holder_pid and lock.holder_acquired_at:
        # a pid can be reused: the start time tells the wedged reconciler from an unrelated process
        suggestion += (
            f"; check first that it is the reconciler that started by {rfc3339(_at(lock.holder_acquired_at))}"
            f" (`ps -o pid,lstart,args -p {lock.holder_pid}`)"
        )
    return SchedulerHealth(
        True, "critical", message, tick_lock=lock.state, heartbeat_age_seconds=lock.heartbeat_age_seconds,
        suggestions=[suggestion],
    )


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _last_evaluated(project: Project) -> datetime | None:
    from rocky_engine.state.schedule import ScheduleRepo
    from rocky_engine.state.store import StateStore

    with StateStore.open(project.state_path(reading=True), writer=False) as store:
        return ScheduleRepo(store).last_evaluated()


def _incident_time(name: str) -> datetime | None:
    try:
        return datetime.strptime(name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


#: why the scheduler section of a project without any ``[schedule]`` has no data
NO_SCHEDULES = "no pipeline declares a [schedule]"


def scheduler_brief(project: Project, store: StateStore, since: datetime | None) -> SchedulerSection:
    """The scheduler section of ``rocky brief``: holds, failure streaks, incidents.

    ``availability`` is ``no_data`` without schedules (every count zero, ``reason`` saying so, the shape
    upstream clients expect), ``unavailable`` (with ``reason``) when the
    state or the incidents directory cannot be read, else ``available``.
    """
    from rocky_engine.state.schedule import ScheduleRepo
    from rocky_engine.wire.brief import FailureStreak, PausedPipeline, SchedulerSection

    if not any(p.schedule is not None for p in project.config.pipelines.values()):
        return SchedulerSection(
            availability="no_data", reason=NO_SCHEDULES, paused=[], holds=[], consecutive_failures=[],
            scheduled_pipelines=0, runs_in_window=0, failed_in_window=0, incident_count=0,
        )
    try:
        rows = ScheduleRepo(store).all()
    except RockyError as exc:
        return SchedulerSection(availability="unavailable", reason=str(exc))
    section = SchedulerSection(
        availability="available",
        paused=[r.pipeline for r in sorted(rows.values(), key=lambda r: r.pipeline) if r.paused],
        holds=[
            PausedPipeline(pipeline=r.pipeline, paused_at=rfc3339(r.paused_at) if r.paused_at else None)
            for r in sorted(rows.values(), key=lambda r: r.pipeline)
            if r.paused
        ],
        consecutive_failures=[
            FailureStreak(
                pipeline=r.pipeline, consecutive_failures=r.consecutive_failures, last_outcome=r.last_outcome,
                last_attempt_at=rfc3339(r.last_attempt_at) if r.last_attempt_at else None,
            )
            for r in sorted(rows.values(), key=lambda r: (-r.consecutive_failures, r.pipeline))
            if r.consecutive_failures > 0
        ],
    )
    last = max((r.last_evaluated_at for r in rows.values() if r.last_evaluated_at), default=None)
    if last is not None:
        section.last_evaluated_at = rfc3339(last)
    try:
        incidents = list_incidents(project.dot_rocky / INCIDENTS_DIR)
    except IncidentDirRefused as exc:
        section.incidents_availability = "unavailable"
        section.incidents_reason = str(exc)
        return section
    cutoff = utc(since) if since is not None else None
    recent = [
        p for p in incidents
        if cutoff is None or ((t := _incident_time(p.name)) is not None and t >= cutoff)
    ]
    section.incident_count = len(recent)
    section.incidents_kept = len(incidents)
    if incidents:
        section.newest_incident = str(incidents[0])
    return section
