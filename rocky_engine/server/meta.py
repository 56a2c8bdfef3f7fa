"""``GET /api/v1/meta``: the engine version, the live optional routes and the fingerprints a client pins.

Upstream Rocky's clients probe this route before they use an optional one (webhook ingress first of all):
a route is listed only while it answers, so ``/api/v1/hooks/trigger/{pipeline}`` appears under
``--scheduler`` with a webhook secret (or the unsigned loopback exception) and never otherwise.
"""

from __future__ import annotations

import hashlib
from functools import cache

from starlette.requests import Request
from starlette.responses import Response

from rocky_engine.server.context import ServerContext
from rocky_engine.server.responses import json_response
from rocky_engine.wire.server import MetaDocument

WEBHOOK_ROUTE = "/api/v1/hooks/trigger/{pipeline}"


def live_routes(ctx: ServerContext, served: list[str]) -> list[str]:
    """The /api/v1 paths of ``served`` that answer under this server's settings."""
    return [
        path for path in served
        if path.startswith("/api/v1/") and (path != WEBHOOK_ROUTE or ctx.settings.webhooks_enabled)
    ]


def capabilities(ctx: ServerContext) -> list[str]:
    """Feature tokens: what a client may rely on from this server as it runs now."""
    tokens = ["jobs", "runs", "schedule_read", "metrics", "openapi"]
    if ctx.settings.scheduler:
        tokens.append("scheduler")
    if ctx.settings.webhooks_enabled:
        tokens.append("webhook_ingress")
        if ctx.settings.webhook_secrets:
            tokens.append("webhook_signatures")
    return tokens


@cache
def schemas_hash() -> str:
    """sha256 over the sources of ``rocky_engine.wire``, where every JSON document is declared once.

    It moves whenever a document shape can have changed (and, conservatively, on any edit there); building
    every model's JSON schema instead costs over a second, too much for a route a client probes.
    """
    from pathlib import Path

    import rocky_engine.wire as wire

    digest = hashlib.sha256()
    for path in sorted(Path(wire.__path__[0]).glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


async def meta(request: Request) -> Response:
    from starlette.concurrency import run_in_threadpool

    from rocky_engine.state.schema import SCHEMA_VERSION

    ctx: ServerContext = request.app.state.ctx
    served = [route.path for route in request.app.routes if hasattr(route, "path")]
    project = ctx.projects.current()
    doc = MetaDocument(
        capabilities=capabilities(ctx),
        routes=live_routes(ctx, served),
        schemas_hash=await run_in_threadpool(schemas_hash),
        state_schema_version=SCHEMA_VERSION,
        config_hash=None if ctx.projects.config_error is not None else project.config.config_hash,
        token_scope="full" if ctx.settings.token is not None else None,
    )
    return json_response(doc)
