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

TOKEN_ENV = "ROCKY_SERVE_TOKEN"
WEBHOOK_SECRET_ENV = "ROCKY_WEBHOOK_SECRET"


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
    #: environment of child runs (None: this process's)
    child_env: Mapping[str, str] | None = field(default=None, compare=False)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def webhooks_enabled(self) -> bool:
        """The ingress is live only under ``--scheduler``, and with a secret unless bound to loopback."""
        return self.scheduler and (bool(self.webhook_secrets) or self.loopback)
