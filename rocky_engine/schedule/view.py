"""A read-only picture of the scheduler for ``GET /api/v1/schedule`` (and anyone else who asks).

It reads stored state only and never evaluates demand (that is ``rocky tick --dry-run``), so it is a cheap,
side-effect-free health read:

- ``tick_lock``: free | held | wedged | never, with the heartbeat's age;
- per configured schedule: cron / timezone / after / freshness, ``enabled``, ``paused``,
  ``last_evaluated_at``, ``last_fire`` (+ source), ``next_fire_at`` (the projection anchored on the last
  occurrence accounted for, so a stalled timer shows the slot it missed, in the past), the backoff in force
  (``throttle``), the failure streak, and ``config_error`` when the schedule cannot be resolved;
- ``claims``: the ``submitted`` claims (in flight, or waiting for the stuck-claim resolver);
- ``timezone`` and ``counts`` (scheduled, enabled, config_errors, in_flight, overdue, throttled), and per
  pipeline ``catchup`` and ``awaiting_first_anchor``, as the published ``ScheduleStatusOutput`` has them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from rocky_engine.schedule.backoff import active_backoff
from rocky_engine.schedule.plan import (
    PipelinePlan,
    Resolution,
    SchedulePlan,
    build_plan,
    freshness_budget,
    resolve_schedule,
)
from rocky_engine.schedule.tick_lock import inspect_tick_lock
from rocky_engine.state._time import rfc3339, utc
from rocky_engine.state.schedule import ScheduleRepo, ScheduleRow
from rocky_engine.state.schedule_claims import ClaimRepo
from rocky_engine.wire.schedule import (
    ScheduleCounts,
    ScheduledPipeline,
    ScheduleStatus,
    SubmittedClaim,
    Throttle,
    TickLockStatus,
)

if TYPE_CHECKING:
    from rocky_engine.project import Project
    from rocky_engine.state.store import StateStore


def _ts(value: datetime | None) -> str | None:
    return rfc3339(value) if value is not None else None


#: what :func:`scheduled_pipelines` asks of a pipeline's schedule (``resolve_schedule`` bound to a project)
Resolver = Callable[[PipelinePlan], Resolution]


def resolver_of(project: Project) -> Resolver:
    """The tick's own rule, bound to ``project`` (the plan checked the crons already): what the tick skips
    as config_error is reported here, a freshness schedule without a budget included."""
    return lambda pp: resolve_schedule(pp, lambda p: freshness_budget(project, p), check_cron=False)


def tick_lock_status(project: Project, now: datetime) -> TickLockStatus:
    """free | held | wedged | never, with the heartbeat's age when someone holds (or held) it."""
    lock = inspect_tick_lock(project.dot_rocky, wall=utc(now).timestamp)
    lock_doc = TickLockStatus(state=lock.state)
    if lock.heartbeat_age_seconds is not None and lock.state != "free":
        # whole seconds, never negative (a heartbeat stamped by a clock slightly ahead): the published type
        lock_doc.heartbeat_age_seconds = max(0, round(lock.heartbeat_age_seconds))
    return lock_doc


def scheduled_pipelines(
    plan: SchedulePlan, rows: Mapping[str, ScheduleRow], now: datetime, resolve: Resolver
) -> list[ScheduledPipeline]:
    """One entry per scheduled pipeline of ``plan``, in plan order, from its stored cursor ``rows``.

    Built validated: pydantic's ``model_construct`` is pure Python and measured slower here (13 fields).
    """
    now = utc(now)
    pipelines = []
    for pp in plan.scheduled:
        row = rows.get(pp.name) or ScheduleRow(pipeline=pp.name)
        resolution = resolve(pp)
        backoff = active_backoff(row.last_outcome, row.consecutive_failures, row.last_attempt_at, now)
        # a cursor made for another expression or zone is not this schedule's: the next tick anchors anew
        anchored = (
            bool(pp.cron) and row.cron_anchor is not None and row.cron == pp.cron
            and row.timezone == pp.timezone
        )
        pipelines.append(ScheduledPipeline(
            pipeline=pp.name,
            enabled=pp.enabled,
            paused=row.paused,
            cron=pp.cron or None,
            timezone=pp.timezone if pp.cron else None,
            catchup=pp.catchup,
            awaiting_first_anchor=bool(pp.cron) and not anchored,
            after=list(pp.after),
            freshness=True if pp.freshness else None,
            config_error=resolution.config_error or None,
            last_evaluated_at=_ts(row.last_evaluated_at),
            last_fire=_ts(row.last_fire),
            last_fire_source=row.last_fire_source,
            next_fire_at=_ts(row.next_fire_at) if anchored else None,
            last_outcome=row.last_outcome,
            last_attempt_at=_ts(row.last_attempt_at),
            consecutive_failures=row.consecutive_failures,
            throttle=Throttle(reason=backoff.reason, resume_at=rfc3339(backoff.resume_at))
            if backoff is not None else None,
        ))
    return pipelines


def schedule_counts(
    pipelines: Sequence[ScheduledPipeline], claims: Sequence[SubmittedClaim], now: datetime
) -> ScheduleCounts:
    """The roll-up of the document at ``now`` (made per read: ``overdue`` moves with the clock)."""
    stamp = rfc3339(now)  # same-width UTC text compares chronologically
    claimed = {c.pipeline for c in claims}
    return ScheduleCounts(
        scheduled=len(pipelines),
        enabled=sum(1 for p in pipelines if p.enabled),
        config_errors=sum(1 for p in pipelines if p.config_error),
        in_flight=sum(1 for p in pipelines if p.pipeline in claimed),
        overdue=sum(1 for p in pipelines if p.next_fire_at is not None and p.next_fire_at < stamp),
        throttled=sum(1 for p in pipelines if p.throttle is not None),
    )


def submitted_claims(store: StateStore) -> list[SubmittedClaim]:
    """The claims whose child was started and not resolved yet."""
    return [
        SubmittedClaim(
            claim_key=c.claim_key, pipeline=c.pipeline, source=c.source,
            logical_ts=rfc3339(c.logical_ts) if c.logical_ts else None, submission_id=c.submission_id,
            state=c.state, created_at=rfc3339(c.created_at), attempts=c.attempts,
        )
        for c in ClaimRepo(store).submitted()
    ]


def schedule_status(
    project: Project, store: StateStore, now: datetime, plan: SchedulePlan | None = None
) -> ScheduleStatus:
    """The scheduler's stored state (optional facts omitted when unknown).

    Args:
        plan: ``build_plan(project.config, check_crons=True)`` when the caller keeps one (the server
            caches it per loaded config: checking 1,000 crons costs more than the rest of the read).

    Raises:
        ConfigError: ``after`` references form a cycle (the whole schedule cannot be resolved).
    """
    lock_doc = tick_lock_status(project, now)
    if plan is None:
        plan = build_plan(project.config, check_crons=True)
    pipelines = scheduled_pipelines(plan, ScheduleRepo(store).all(), now, resolver_of(project))
    claims = submitted_claims(store)
    return ScheduleStatus(
        timezone=project.config.schedule.timezone, tick_lock=lock_doc,
        counts=schedule_counts(pipelines, claims, now), pipelines=pipelines, claims=claims,
    )
