"""What one ``rocky serve`` process was started with (flags and environment), resolved once at startup."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_POLL_INTERVAL_SECONDS = 15.0
DEFAULT_DRAIN_TIMEOUT_SECONDS = 60.0
#: SIGTERM -> SIGKILL grace for a child the drain terminates (fixed in production; tests shrink it)
DEFAULT_KILL_GRACE_SECONDS = 60.0
#: webhook token bucket: sustained demands per second, and the burst it absorbs
DEFAULT_WEBHOOK_RATE = 10.0
DEFAULT_WEBHOOK_BURST = 20
#: a webhook body over this is refused with 413 before it is read in full
MAX_WEBHOOK_BODY_BYTES = 1024 * 1024
#: the same for the body of ``POST /api/v1/jobs/run``
MAX_JOB_BODY_BYTES = 64 * 1024

TOKEN_ENV = "ROCKY_SERVE_TOKEN"
WEBHOOK_SECRET_ENV = "ROCKY_WEBHOOK_SECRET"
ALLOWED_HOSTS_ENV = "ROCKY_SERVE_ALLOWED_HOSTS"
ALLOWED_ORIGINS_ENV = "ROCKY_SERVE_ALLOWED_ORIGINS"


@dataclass(frozen=True)
class RequestLimits:
    """What one request, and one client, may cost the server before it is refused (docs/server.md,
    "Limits"). Every bound holds before the bytes it bounds are buffered."""

    #: the request head (request line and headers); over it: 431 (flag --max-header-bytes)
    max_header_bytes: int = 32 * 1024
    #: header fields in one request; over it: 431
    max_headers: int = 100
    #: the request target (path and query); over it: 414
    max_request_line_bytes: int = 8 * 1024
    #: open connections served at once; one more is answered 503 and closed (flag --max-connections)
    max_connections: int = 64
    #: a request's head and body must arrive within this many seconds of the connection opening (or of
    #: the previous response on a kept-alive connection); after it: 408 and the connection is closed
    request_timeout_seconds: float = 10.0
    #: an idle kept-alive connection is closed after this many seconds (uvicorn's timeout_keep_alive)
    keep_alive_seconds: int = 5
    #: after a refusal, how long the rest of what the client sends is read and dropped, so that it reads
    #: the refusal instead of a connection reset
    linger_seconds: float = 2.0


def is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` and ``localhost`` are loopback; anything else (``0.0.0.0`` too) is not."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def parse_secrets(raw: str | None) -> tuple[str, ...]:
    """``ROCKY_WEBHOOK_SECRET``: one secret, or several comma-separated ones during a rotation."""
    if not raw:
        return ()
    return tuple(s.strip() for s in raw.split(",") if s.strip())


@dataclass(frozen=True)
class ServerSettings:
    """Resolved flags of one server process."""

    config_path: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    scheduler: bool = False
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS
    drain_timeout_seconds: float = DEFAULT_DRAIN_TIMEOUT_SECONDS
    kill_grace_seconds: float = DEFAULT_KILL_GRACE_SECONDS
    webhook_secrets: tuple[str, ...] = ()
    webhook_rate_per_second: float = DEFAULT_WEBHOOK_RATE
    webhook_burst: int = DEFAULT_WEBHOOK_BURST
    state_path: str | None = None
    state_namespace: str | None = None
    #: Host names accepted besides localhost and the address a connection arrived on (--allowed-host)
    allowed_hosts: tuple[str, ...] = ()
    #: browser origins allowed to send mutating requests besides the server's own (--allowed-origin)
    allowed_origins: tuple[str, ...] = ()
    limits: RequestLimits = field(default_factory=RequestLimits)
    #: environment of child runs (None: this process's)
    child_env: Mapping[str, str] | None = field(default=None, compare=False)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def unsigned_webhooks(self) -> bool:
        """The local-development exception: under ``--scheduler`` on loopback, with neither a webhook
        secret nor a token, the ingress accepts unsigned demands (from non-browser clients only). A
        configured token means the operator secured the server, so the route then needs a secret."""
        return self.scheduler and not self.webhook_secrets and self.loopback and self.token is None

    @property
    def webhooks_enabled(self) -> bool:
        """The ingress is live only under ``--scheduler``, with a secret or as the unsigned exception."""
        return self.scheduler and (bool(self.webhook_secrets) or self.unsigned_webhooks)
