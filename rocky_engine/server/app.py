"""The HTTP application of ``rocky serve`` (CONTRACT section 7): routes, JSON errors, Bearer auth.

Every request first passes the guard (``guard.py``: a Host this server answers for, no cross-site browser
POST), then the Bearer token check (when a token is set) on every route but ``/api/v1/health`` and the
webhook ingress; errors are ``{code, message}``; CORS is off (no CORS middleware: browsers on other origins
cannot read the answers). The size, count, time and connection limits are enforced below the app, in the
HTTP protocol (``protocol.py``). Blocking work (the state store, the spool) runs in the thread pool so the
event loop keeps answering, and store reads queue on the server's one read permit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from rocky_engine import __version__
from rocky_engine.errors import StateError, UsageError
from rocky_engine.logs import get_logger
from rocky_engine.schedule.spool import list_demands, spool_dir_of
from rocky_engine.server.auth import BearerAuth
from rocky_engine.server.context import ServerContext
from rocky_engine.server.drain import Drain
from rocky_engine.server.guard import RefusalLog, RequestGuard, RequestPolicy
from rocky_engine.server.job_results import job_wire
from rocky_engine.server.jobs import JobRejected
from rocky_engine.server.meta import meta
from rocky_engine.server.metrics import CONTENT_TYPE, ScrapeFacts
from rocky_engine.server.openapi import openapi_document
from rocky_engine.server.responses import (
    ROUTER_CODES,
    BodyTooLarge,
    error_response,
    json_response,
    query_int,
    read_body,
)
from rocky_engine.server.schedule_view import get_schedule, get_spool
from rocky_engine.server.settings import MAX_JOB_BODY_BYTES
from rocky_engine.server.webhook import trigger
from rocky_engine.state._time import now_utc
from rocky_engine.wire.jobs import JobAccepted, JobList
from rocky_engine.wire.server import HealthDocument

log = get_logger("server")


def _ctx(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.ctx
    return ctx


# ---------------------------------------------------------------------- routes


async def health(request: Request) -> Response:
    ctx = _ctx(request)
    draining = ctx.draining.is_set()
    doc = HealthDocument(status="draining" if draining else "ok", scheduler=ctx.settings.scheduler,
                         draining=draining)
    return json_response(doc, 503 if draining else 200)


async def openapi(request: Request) -> Response:
    return json_response(openapi_document())


async def run_job(request: Request) -> Response:
    ctx = _ctx(request)
    try:
        raw = await read_body(request, MAX_JOB_BODY_BYTES)
    except BodyTooLarge as exc:
        return error_response(413, "payload_too_large", str(exc))
    try:
        pipeline, filter_ = _run_body(raw)
    except ValueError as exc:
        return error_response(400, "bad_request", str(exc))
    try:
        row = await run_in_threadpool(ctx.jobs.submit_run, pipeline, filter_)
    except JobRejected as exc:
        return error_response(exc.status, exc.code, exc.message, job_id=exc.job_id)
    return json_response(JobAccepted(job_id=row.job_id, state=row.state), 202,
                         headers={"Location": f"/api/v1/jobs/{row.job_id}"})


def _run_body(raw: bytes) -> tuple[str | None, str | None]:
    """``{pipeline?, filter?}`` (an empty body is ``{}``).

    Raises:
        ValueError: not a JSON object, an unknown key, a value of the wrong type, a filter not key=value.
    """
    if not raw.strip():
        return None, None
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("request body must be a JSON object like {\"pipeline\": \"orders\"}")
    unknown = sorted(set(doc) - {"pipeline", "filter"})
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; the body takes 'pipeline' and 'filter'")
    pipeline, filter_ = doc.get("pipeline"), doc.get("filter")
    for key, value in (("pipeline", pipeline), ("filter", filter_)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"'{key}' must be a non-empty string")
    if filter_ is not None and ("=" not in filter_ or filter_.startswith("=")):
        raise ValueError(f"'filter' must look like key=value (id=..., table=... or a component), got "
                         f"'{filter_}'")
    return pipeline, filter_


async def list_jobs(request: Request) -> Response:
    ctx = _ctx(request)
    try:
        limit = query_int(request, "limit", 50, 1, 1000)
    except ValueError as exc:
        return error_response(400, "bad_request", str(exc))
    try:
        rows = await run_in_threadpool(ctx.jobs.list, limit)
    except StateError as exc:
        return error_response(503, "state_unavailable", str(exc))
    return json_response(JobList(jobs=[job_wire(r) for r in rows]))


async def get_job(request: Request) -> Response:
    ctx = _ctx(request)
    job_id = request.path_params["job_id"]
    try:
        row = await run_in_threadpool(ctx.jobs.get, job_id)
    except StateError as exc:
        return error_response(503, "state_unavailable", str(exc))
    if row is None:
        return error_response(404, "job_not_found", f"no job '{job_id}' on this server's project")
    return json_response(job_wire(row))


async def runs(request: Request) -> Response:
    from rocky_engine.ops.history import history_run, parse_since
    from rocky_engine.wire.history import HistoryResult

    ctx = _ctx(request)
    try:
        limit = query_int(request, "limit", 50, 1, 1000)
        since_text = request.query_params.get("since")
        since = parse_since(since_text) if since_text else None
    except (ValueError, UsageError) as exc:
        return error_response(400, "bad_request", str(exc))

    def read() -> dict[str, Any]:
        with ctx.read_store() as store:
            records = store.runs.list(limit=limit, since=since)
        return HistoryResult(version=__version__, count=len(records),
                             runs=[history_run(r, audit=True) for r in records]).wire()

    try:
        doc = await run_in_threadpool(read)
    except StateError as exc:
        return error_response(503, "state_unavailable", str(exc))
    return json_response(doc)


async def metrics(request: Request) -> Response:
    ctx = _ctx(request)
    facts = await run_in_threadpool(scrape_facts, ctx)
    return Response(ctx.metrics.render(facts), media_type=CONTENT_TYPE)


def scrape_facts(ctx: ServerContext) -> ScrapeFacts:
    """The gauges read from disk at scrape time (a fact that cannot be read is left out)."""
    from rocky_engine.schedule.tick_lock import inspect_tick_lock
    from rocky_engine.state.jobs import JobRepo
    from rocky_engine.state.schedule import ScheduleRepo

    project = ctx.projects.current()
    facts = ScrapeFacts(
        draining=ctx.draining.is_set(), scheduler_enabled=ctx.settings.scheduler,
        config_error=ctx.projects.config_error is not None,
    )
    with contextlib.suppress(StateError), ctx.read_store() as store:
        rows = ScheduleRepo(store).all()
        facts.consecutive_failures = {name: row.consecutive_failures for name, row in rows.items()}
        facts.jobs_by_state = JobRepo(store).counts()
    listing = list_demands(spool_dir_of(project.dot_rocky))
    facts.spool_readable = not listing.errors
    facts.spool_depth = len(listing.demands)
    if listing.demands:
        oldest = min(d.accepted_at for d in listing.demands)
        facts.spool_oldest_age_seconds = max(0.0, (now_utc() - oldest).total_seconds())
    with contextlib.suppress(OSError):
        facts.tick_lock_state = inspect_tick_lock(project.dot_rocky).state
    if ctx.last_tick.at is not None:
        facts.last_tick_age_seconds = max(0.0, ctx.wall() - ctx.last_tick.at)
    return facts


ROUTES: list[Route] = [
    Route("/api/v1/health", health, methods=["GET"]),
    Route("/api/v1/openapi.json", openapi, methods=["GET"]),
    Route("/api/v1/meta", meta, methods=["GET"]),
    Route("/api/v1/jobs/run", run_job, methods=["POST"]),
    Route("/api/v1/jobs", list_jobs, methods=["GET"]),
    Route("/api/v1/jobs/{job_id}", get_job, methods=["GET"]),
    Route("/api/v1/runs", runs, methods=["GET"]),
    Route("/api/v1/schedule", get_schedule, methods=["GET"]),
    Route("/api/v1/schedule/spool", get_spool, methods=["GET"]),
    Route("/api/v1/hooks/trigger/{pipeline}", trigger, methods=["POST"]),
    Route("/metrics", metrics, methods=["GET"]),
]


# ---------------------------------------------------------------------- errors


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = ROUTER_CODES.get(exc.status_code, "error")
    message = exc.detail if exc.status_code != 404 else f"no route {request.method} {request.url.path}"
    return error_response(exc.status_code, code, str(message), headers=exc.headers)


async def _client_gone(request: Request, exc: Exception) -> Response:
    # The client went away (or the request deadline cut it off) while its body was read: nobody is left
    # to answer, and it is no bug.
    return Response(status_code=499)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("internal error on %s %s (%s: %s); this is a bug in rocky, please report it",
              request.method, request.url.path, type(exc).__name__, exc)
    return error_response(500, "internal_error", f"internal error ({type(exc).__name__}); see the server log")


def create_app(ctx: ServerContext, drain: Drain | None = None) -> Starlette:
    """The Starlette app for ``ctx``; with ``drain``, the app's shutdown waits for running children.

    ``app.state.refusals`` is the refusal log the HTTP protocol shares with the guard
    (``runner.uvicorn_config``).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if drain is not None:
            # HTTP has drained by now; the children get the rest of the window (then SIGTERM, SIGKILL).
            await anyio.to_thread.run_sync(drain.wait, abandon_on_cancel=True)

    refusals = RefusalLog(ctx.metrics)
    app = Starlette(
        routes=ROUTES,
        middleware=[
            Middleware(RequestGuard, policy=RequestPolicy(ctx.settings), refusals=refusals),
            Middleware(BearerAuth, token=ctx.settings.token),
        ],
        exception_handlers={
            HTTPException: _http_error, ClientDisconnect: _client_gone, Exception: _internal_error,
        },
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    app.state.refusals = refusals
    return app
