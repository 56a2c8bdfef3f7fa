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
from rocky_engine.output import redacted_document_text
from rocky_engine.schedule.control import spool_listing
from rocky_engine.schedule.spool import SpoolError
from rocky_engine.schedule.tick_lock import inspect_tick_lock
from rocky_engine.schedule.view import schedule_counts, submitted_claims, tick_lock_status
from rocky_engine.server.context import ServerContext
from rocky_engine.server.responses import error_response, json_response, json_text_response
from rocky_engine.server.schedule_cache import PipelinesRendering
from rocky_engine.state._time import now_utc, rfc3339
from rocky_engine.wire.schedule import ScheduleDocument, ServerScheduler, SubmittedClaim, TickLockStatus
from rocky_engine.wire.spool import SpoolResult

#: the top-level ``pipelines`` key of the document written with no entries (two spaces: the top level; a
#: nested key is indented further and a JSON string holds no raw newline, so this is found only there)
_EMPTY_PIPELINES = '\n  "pipelines": []'


def schedule_document_text(ctx: ServerContext) -> str:
    """The ``/api/v1/schedule`` document as JSON text, exactly as ``document_text`` would write it.

    The pipelines array comes from the context's :class:`PipelinesCache` (rendered again only when it
    changed); the rest (``now``, the tick lock, the claims, the server's scheduler) is made per request and
    the array is set into its place.

    Raises:
        StateError: the state store cannot be read.
    """
    project = ctx.projects.current()
    now = now_utc()
    pipelines: PipelinesRendering | None = None
    claims: list[SubmittedClaim] = []
    config_error: str | None = None
    try:
        project, plan = ctx.projects.plan()
        with ctx.read_store() as store:
            lock = tick_lock_status(project, now)
            pipelines = ctx.schedule_cache.pipelines(project, plan, store, now)
            claims = submitted_claims(store)
    except ConfigError as exc:
        # An `after` cycle: no pipeline can be resolved, but the lock and the failure are still worth a read.
        lock = TickLockStatus(state=inspect_tick_lock(project.dot_rocky, wall=now.timestamp).state)
        config_error = str(exc)
    scheduler = ServerScheduler(resident=ctx.settings.scheduler)
    if ctx.settings.scheduler:
        scheduler.poll_interval_seconds = ctx.settings.poll_interval_seconds
        scheduler.last_tick = ctx.last_tick.wire(ctx.wall())
    doc = ScheduleDocument(
        now=rfc3339(now), timezone=project.config.schedule.timezone, tick_lock=lock,
        counts=schedule_counts(pipelines.entries if pipelines is not None else [], claims, now),
        claims=claims, config_error=ctx.projects.config_error or config_error, scheduler=scheduler,
    )
    text = redacted_document_text(doc)
    if pipelines is None or not pipelines.entries:
        return text
    if _EMPTY_PIPELINES in text:
        return text.replace(_EMPTY_PIPELINES, '\n  "pipelines": ' + pipelines.text, 1)
    # a secret piece matched the key itself: write the whole document the ordinary way
    doc.pipelines = pipelines.entries
    return redacted_document_text(doc)


async def get_schedule(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    try:
        text = await run_in_threadpool(schedule_document_text, ctx)
    except StateError as exc:
        return error_response(503, "state_unavailable", str(exc))
    return json_text_response(text)


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
