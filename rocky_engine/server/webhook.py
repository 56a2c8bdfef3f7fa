"""``POST /api/v1/hooks/trigger/{pipeline}``: signed webhook ingress into the scheduler's spool.

The checks run in this order, and each answer is final:

1. ``404`` unless the server runs ``--scheduler`` (nothing else would consume the demand) and has a secret
   (``ROCKY_WEBHOOK_SECRET``), or is bound to loopback without a token (local development: unsigned
   requests accepted, but ``403`` for one a browser sent: it carries ``Origin`` or ``Sec-Fetch-Site``, and
   a page open on the developer's machine must not fire pipelines);
2. ``413`` for a body over 1 MiB (refused before it is read in full);
3. ``401`` for a missing or wrong signature (``signatures.py``: X-Rocky-Signature or Standard Webhooks);
4. ``429`` with ``Retry-After`` from a token bucket, before anything is written;
5. ``400`` for an unusable delivery id, ``404`` for an unknown pipeline (only now, after the signature, so an
   unauthenticated caller cannot enumerate pipeline names);
6. a durable spool write (temp file, fsync, link, directory fsync), then ``202 {"demand": "accepted",
   "demand_uid": ...}`` or ``202 {"demand": "duplicate"}``.

The pipeline name only ever reaches a dict lookup and a hash: spool file names are digests, so no name,
however odd, touches the filesystem outside ``.rocky/pending-demands/``.
"""

from __future__ import annotations

import re

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from rocky_engine.logs import get_logger
from rocky_engine.schedule.spool import SpoolError, spool_dir_of, write_demand
from rocky_engine.server.context import ServerContext
from rocky_engine.server.ratelimit import retry_after_header
from rocky_engine.server.responses import BodyTooLarge, error_response, json_response, read_body
from rocky_engine.server.settings import MAX_WEBHOOK_BODY_BYTES
from rocky_engine.server.signatures import verify
from rocky_engine.state._time import now_utc
from rocky_engine.wire.server import DemandAnswer

log = get_logger("server")

DELIVERY_HEADER = "x-rocky-delivery"
MAX_DELIVERY_ID = 256
#: the names rocky.toml allows for a pipeline (config/loader.py); anything else cannot be one
_PIPELINE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
_PRINTABLE = re.compile(r"^[\x21-\x7e]+$")


async def trigger(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    response = await _trigger(ctx, request)
    ctx.metrics.webhook(response.status_code)
    return response


async def _trigger(ctx: ServerContext, request: Request) -> Response:
    settings = ctx.settings
    if not settings.scheduler:
        return error_response(404, "not_found", "webhook ingress is off: it runs only under `rocky serve "
                              "--scheduler`")
    if not settings.webhook_secrets and not settings.loopback:
        return error_response(404, "not_found", "webhook ingress is off: set ROCKY_WEBHOOK_SECRET (or bind "
                              "to loopback for unsigned local use)")
    if not settings.webhook_secrets and settings.token is not None:
        return error_response(404, "not_found", "webhook ingress is off: a token is configured, so the route "
                              "needs ROCKY_WEBHOOK_SECRET (unsigned demands are refused)")
    if not settings.webhook_secrets and _from_a_browser(request):
        return error_response(403, "signature_required", "an unsigned webhook is accepted only from a client "
                              "that sends no Origin or Sec-Fetch-Site header (never from a web page); set "
                              "ROCKY_WEBHOOK_SECRET and sign the request")
    try:
        body = await read_body(request, MAX_WEBHOOK_BODY_BYTES)
    except BodyTooLarge:
        return error_response(413, "payload_too_large",
                              f"webhook body is over the {MAX_WEBHOOK_BODY_BYTES} byte limit")
    webhook_id: str | None = None
    if settings.webhook_secrets:
        verdict = verify(request.headers, body, settings.webhook_secrets, ctx.wall())
        if not verdict.ok:
            return error_response(401, "invalid_signature", verdict.reason or "bad signature")
        webhook_id = verdict.webhook_id
    wait = ctx.bucket.take()
    if wait > 0:
        return error_response(
            429, "rate_limited", "too many webhook requests; retry after the Retry-After delay",
            headers={"Retry-After": retry_after_header(wait)},
        )
    delivery = request.headers.get(DELIVERY_HEADER) or webhook_id
    if delivery is not None and (len(delivery) > MAX_DELIVERY_ID or not _PRINTABLE.match(delivery)):
        return error_response(
            400, "bad_request",
            f"X-Rocky-Delivery must be 1 to {MAX_DELIVERY_ID} printable ASCII characters without spaces",
        )
    pipeline = request.path_params["pipeline"]
    project = ctx.projects.current()
    if not _PIPELINE_NAME.match(pipeline) or pipeline not in project.config.pipelines:
        return error_response(404, "pipeline_not_found", "no such pipeline in this project's rocky.toml")
    spool = spool_dir_of(project.dot_rocky)
    try:
        written = await run_in_threadpool(
            write_demand, spool, pipeline=pipeline, body=body, delivery_id=delivery, now=now_utc()
        )
    except SpoolError as exc:
        log.error("webhook for %s not accepted: %s", pipeline, exc)
        return error_response(503, "spool_unavailable", f"{exc}")
    if written.status == "duplicate":
        return json_response(DemandAnswer(demand="duplicate"), 202)
    log.info("webhook demand %s accepted for %s%s", written.demand_uid, pipeline,
             f" (delivery {delivery})" if delivery else "")
    return json_response(DemandAnswer(demand="accepted", demand_uid=written.demand_uid), 202)


def _from_a_browser(request: Request) -> bool:
    """Browsers mark every request they send with ``Origin`` (POST) or the Fetch metadata headers."""
    return request.headers.get("origin") is not None or request.headers.get("sec-fetch-site") is not None
