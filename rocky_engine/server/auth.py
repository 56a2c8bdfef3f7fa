"""Bearer-token authentication for every route but the health check and the webhook ingress.

``--token`` / ``ROCKY_SERVE_TOKEN`` sets the token; without one (allowed only on a loopback bind) the API
is open to whoever can reach the loopback interface. The comparison is constant time
(``hmac.compare_digest``). A refusal is ``401 {code: "unauthorized"}`` with ``WWW-Authenticate: Bearer``.
The webhook route authenticates by its own HMAC signature instead (``webhook.py``).
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from rocky_engine.server.responses import error_response

HEALTH_PATH = "/api/v1/health"
WEBHOOK_PREFIX = "/api/v1/hooks/trigger/"


def exempt(path: str) -> bool:
    """Routes that never ask for the Bearer token."""
    return path == HEALTH_PATH or path.startswith(WEBHOOK_PREFIX)


def token_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer <token>`` with exactly this token (constant-time comparison)."""
    if not header:
        return False
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


class BearerAuth:
    """ASGI middleware: refuse a request without the right Bearer token (when a token is configured)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.token is None or exempt(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        if token_matches(header, self.token):
            await self.app(scope, receive, send)
            return
        if header is None:
            message = (
                "missing bearer token: send 'Authorization: Bearer <token>' (--token / ROCKY_SERVE_TOKEN)"
            )
            challenge = 'Bearer realm="rocky"'
        else:
            message = "invalid bearer token"
            challenge = 'Bearer realm="rocky", error="invalid_token"'
        response = error_response(401, "unauthorized", message, headers={"WWW-Authenticate": challenge})
        await response(scope, receive, send)
