"""Who may ask: the ``Host`` allow-list and the refusal of cross-site browser requests (docs/server.md,
"Threat model").

A loopback ``rocky serve`` without a token trusts whoever can reach 127.0.0.1, and a browser on the same
machine can: any page it opens may send "simple" cross-origin POSTs (no CORS preflight) and, through DNS
rebinding, read GET answers under its own name. This ASGI middleware, the outermost layer of the app, runs
before the token check and any route:

1. ``Host`` must name this server: ``localhost``, the address the connection arrived on, the ``--host``
   given, or a name from ``--allowed-host``; anything else is ``421 host_not_allowed``. A rebinding page
   always sends its own name, so it is refused even for GETs.
2. A mutating request (any method but GET, HEAD, OPTIONS) that a browser sent for another site is
   ``403 cross_origin``: an ``Origin`` that is neither the server's own (same host and port as ``Host``)
   nor one from ``--allowed-origin``, or, without ``Origin``, ``Sec-Fetch-Site: cross-site|same-site``.
   Machine clients (curl, Dagster, webhook senders) send neither header and are not affected.

Refusals close the connection, are counted in ``rocky_http_refused_total{reason}`` and logged once per
distinct reason and value (a flood does not flood the log).
"""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from rocky_engine.logs import get_logger
from rocky_engine.server.metrics import Metrics
from rocky_engine.server.responses import error_response
from rocky_engine.server.settings import ServerSettings

log = get_logger("server")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` values a browser sends for a request another site's page started
CROSS_SITE = frozenset({"cross-site", "same-site"})
#: distinct refusals logged before the log goes quiet (the counter keeps counting)
_LOGGED_CAP = 64


@dataclass(frozen=True)
class Refusal:
    """A request the server will not serve: its status and the ``{code, message}`` error body."""

    status: int
    code: str
    message: str
    #: what is logged once per distinct value (never a secret: a Host, an Origin, a limit)
    detail: str = ""

    def response(self) -> Response:
        return error_response(self.status, self.code, self.message, headers={"Connection": "close"})


class RefusalLog:
    """Logs the first refusal of each distinct (code, detail) and counts every one in the metrics."""

    def __init__(self, metrics: Metrics | None) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._seen: set[tuple[str, str]] = set()

    def record(self, refusal: Refusal) -> None:
        if self.metrics is not None:
            self.metrics.refused(refusal.code)
        key = (refusal.code, refusal.detail)
        with self._lock:
            if key in self._seen or len(self._seen) >= _LOGGED_CAP:
                return
            self._seen.add(key)
        log.warning("refused a request with %s %s: %s (logged once; rocky_http_refused_total counts them)",
                    refusal.status, refusal.code, refusal.detail or refusal.message)


# ---------------------------------------------------------------------- names


def host_name(value: str) -> str:
    """The host part of a ``Host`` header, ``host[:port]`` or a bare address, lower case, without
    brackets, port or a trailing dot (``[::1]:8080`` -> ``::1``, ``LocalHost.:80`` -> ``localhost``)."""
    text = value.strip().lower()
    if text.startswith("["):
        name, _, _ = text[1:].partition("]")
    elif text.count(":") > 1:
        name = text  # a bare IPv6 address (a socket's address; Host headers bracket them)
    else:
        name, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            name = text
    return name.rstrip(".")


def normalize_allowed_host(value: str) -> str:
    """A ``--allowed-host`` value as it is compared.

    Raises:
        ValueError: not a bare host name or IP address (a scheme, a path, a port, a space).
    """
    text = value.strip().lower()
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if _is_ip(bare):
        return bare
    if (not bare or any(c in bare for c in "/@?# \t:") or not all(c.isalnum() or c in "-._" for c in bare)):
        raise ValueError(f"--allowed-host takes a host name or IP address without scheme, port or path "
                         f"(like rocky.example.com), got '{value}'")
    return bare.rstrip(".")


def normalize_origin(value: str) -> str:
    """A ``--allowed-origin`` value as browsers send it: ``scheme://host[:port]`` in lower case.

    Raises:
        ValueError: not an http(s) origin (a path, a query, credentials, no host).
    """
    parts = urlsplit(value.strip().lower())
    ok = (parts.scheme in ("http", "https") and parts.hostname and parts.path in ("", "/")
          and not parts.query and not parts.fragment and "@" not in parts.netloc)
    try:
        _ = parts.port  # a malformed port raises here
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"--allowed-origin takes an origin like https://dash.example.com or "
                         f"http://localhost:3000 (scheme, host, optional port; no path), got '{value}'")
    return f"{parts.scheme}://{parts.netloc}"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _unspecified(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).is_unspecified
    except ValueError:
        return False


# ---------------------------------------------------------------------- the policy


class RequestPolicy:
    """The Host and Origin rules of one server, resolved from its settings once."""

    def __init__(self, settings: ServerSettings) -> None:
        names = {"localhost", *settings.allowed_hosts}
        bound = host_name(settings.host)
        if not _unspecified(bound):  # 0.0.0.0 / :: is no name a client uses; the local address is
            names.add(bound)
        self.hosts = frozenset(names)
        self.origins = frozenset(settings.allowed_origins)

    def describe(self) -> str:
        """The startup log's account of what is accepted."""
        hosts = ", ".join(sorted(self.hosts)) + ", and the address a connection arrives on"
        origins = ", ".join(sorted(self.origins)) if self.origins else "none besides the server's own"
        return f"Host accepted: {hosts}; browser origins allowed to POST: {origins}"

    def host_refusal(self, host: str | None, local_address: str | None, http_version: str) -> Refusal | None:
        if host is None:
            if http_version == "1.0":
                return None  # old machine clients; no browser sends a request without Host
            return Refusal(400, "bad_request", "an HTTP/1.1 request needs a Host header",
                           detail="no Host header")
        name = host_name(host)
        if name in self.hosts or (local_address is not None and name == host_name(local_address)):
            return None
        shown = _shown(host)
        return Refusal(
            421, "host_not_allowed",
            f"this server does not answer for Host {shown}; address it as localhost or by its IP "
            "address, or start it with --allowed-host NAME (ROCKY_SERVE_ALLOWED_HOSTS)",
            detail=f"Host {shown}",
        )

    def origin_refusal(
        self, method: str, host: str | None, origin: str | None, fetch_site: str | None
    ) -> Refusal | None:
        if method in SAFE_METHODS:
            return None
        if origin is not None:
            if self._own_or_allowed(origin, host):
                return None
            shown = _shown(origin)
            return Refusal(
                403, "cross_origin",
                f"refusing a {method} sent by a page of another origin ({shown}); a page that should "
                "use the API needs --allowed-origin ORIGIN (ROCKY_SERVE_ALLOWED_ORIGINS)",
                detail=f"Origin {shown}",
            )
        if fetch_site is not None and fetch_site.strip().lower() in CROSS_SITE:
            return Refusal(
                403, "cross_origin",
                f"refusing a {method} a browser sent for another site (Sec-Fetch-Site: "
                f"{_shown(fetch_site)[1:-1]}); API clients send no Origin or Sec-Fetch-Site header",
                detail=f"Sec-Fetch-Site {_shown(fetch_site)}",
            )
        return None

    def _own_or_allowed(self, origin: str, host: str | None) -> bool:
        text = origin.strip().lower()
        if text in self.origins:
            return True
        parts = urlsplit(text)
        # Same host and port as the Host header (already allowed): the server's own page. The scheme is
        # not compared, so a TLS proxy in front (Origin https://name, Host name) counts as the same.
        return (host is not None and parts.scheme in ("http", "https") and parts.path == ""
                and parts.netloc == host.strip().lower())


def _shown(value: str) -> str:
    """A header value fit for a message and a log line: quoted, printable, at most 100 characters."""
    clean = "".join(c if c.isprintable() else "?" for c in value[:100])
    return f"'{clean}{'...' if len(value) > 100 else ''}'"


class RequestGuard:
    """ASGI middleware applying :class:`RequestPolicy` before anything else runs."""

    def __init__(self, app: ASGIApp, policy: RequestPolicy, refusals: RefusalLog) -> None:
        self.app = app
        self.policy = policy
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        self.refusals.record(refusal)
        await refusal.response()(scope, receive, send)

    def refusal(self, scope: Scope) -> Refusal | None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        server = scope.get("server")
        local = server[0] if server else None
        version = scope.get("http_version", "1.1")
        return self.policy.host_refusal(host, local, version) or self.policy.origin_refusal(
            scope["method"], host, headers.get("origin"), headers.get("sec-fetch-site")
        )
