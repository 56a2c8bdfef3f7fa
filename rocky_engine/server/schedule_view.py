"""``GET /api/v1/schedule`` and ``GET /api/v1/schedule/spool``: the scheduler's state, read-only.

The schedule document is ``schedule/view.py``'s (tick lock free | held | wedged | never, each scheduled
pipeline's cron / after / freshness, last_evaluated_at, last_fire, next_fire_at anchored on the last fire,
throttle, config_error, and the in-flight claims) plus what only the server knows: whether it runs the
resident scheduler, its poll interval and its last tick attempt, and a ``config_error`` when rocky.toml
stopped loading (the pipelines shown are then the last good config's). It never evaluates demand.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from rocky_engine.errors import ConfigError, StateError
from rocky_engine.schedule.control import spool_listing
from rocky_engine.schedule.spool import SpoolError
from rocky_engine.schedule.tick_lock import inspect_tick_lock
from rocky_engine.schedule.view import schedule_status
from rocky_engine.server.context import ServerContext
from rocky_engine.server.responses import error_response, json_response
from rocky_engine.state._time import now_utc, rfc3339
from rocky_engine.wire.schedule import ScheduleDocument, ScheduleStatus, ServerScheduler, TickLockStatus
from rocky_engine.wire.spool import SpoolResult


def schedule_document(ctx: ServerContext) -> ScheduleDocument:
    """The ``/api/v1/schedule`` document.

    Raises:
        StateError: the state store cannot be read.
    """
    project = ctx.projects.current()
    now = now_utc()
    try:
        project, plan = ctx.projects.plan()
        with ctx.read_store() as store:
            status = schedule_status(project, store, now, plan)
    except ConfigError as exc:
        # An `after` cycle: no pipeline can be resolved, but the lock and the failure are still worth a read.
        lock = inspect_tick_lock(project.dot_rocky, wall=now.timestamp)
        status = ScheduleStatus(tick_lock=TickLockStatus(state=lock.state), config_error=str(exc))
    scheduler = ServerScheduler(resident=ctx.settings.scheduler)
    if ctx.settings.scheduler:
        scheduler.poll_interval_seconds = ctx.settings.poll_interval_seconds
        scheduler.last_tick = ctx.last_tick.wire(ctx.wall())
    return ScheduleDocument(
        now=rfc3339(now), tick_lock=status.tick_lock, pipelines=status.pipelines, claims=status.claims,
        config_error=ctx.projects.config_error or status.config_error, scheduler=scheduler,
    )


async def get_schedule(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    try:
        doc = await run_in_threadpool(schedule_document, ctx)
    except StateError as exc:
        return error_response(503, "state_unavailable", str(exc))
    return json_response(doc)


async def get_spool(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx

    def listing() -> SpoolResult:
        return spool_listing(ctx.projects.current().dot_rocky)

    try:
        doc = await run_in_threadpool(listing)
    except SpoolError as exc:
        # "we cannot tell" is not "nothing is waiting"
        return error_response(500, "spool_unreadable", str(exc))
    return json_response(doc)
