"""``rocky serve``: the HTTP API, optionally with the resident scheduler and webhook ingress (CONTRACT 7)."""

from __future__ import annotations

import argparse
from typing import Any


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _at_least(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {text}")
        return value

    return parse


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535 (0 picks a free one), got {text}")
    return value


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "serve",
        parents=[common],
        help="serve the HTTP API (jobs, history, schedule, webhooks, metrics); --scheduler runs schedules",
        description="Serve Rocky's HTTP API on --host:--port. Every route but /api/v1/health and the webhook "
        "ingress needs 'Authorization: Bearer <token>' when a token is set (--token or ROCKY_SERVE_TOKEN; "
        "required to bind anything but loopback). --scheduler also runs the reconciler of `rocky tick` "
        "in-process every --poll-interval-seconds and opens POST /api/v1/hooks/trigger/{pipeline} "
        "(signed with ROCKY_WEBHOOK_SECRET; unsigned only on loopback with neither a secret nor a token, "
        "and never from a browser). Every request must name this server in its Host header (localhost, "
        "the address it arrived on, or --allowed-host), a browser page of another origin cannot POST "
        "(--allowed-origin lets one), and requests are bounded in size, count and time before they are "
        "read. SIGTERM or Ctrl-C drains: no new work, a running child gets --drain-timeout-seconds, then "
        "SIGTERM and SIGKILL 60 s later. See docs/server.md (threat model and limits).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8080, help="port to bind (default 8080; 0 picks a free one)")
    p.add_argument("--token", help="Bearer token for the API (default: env ROCKY_SERVE_TOKEN)")
    p.add_argument("--scheduler", action="store_true",
                   help="run the resident scheduler and accept webhooks")
    p.add_argument("--poll-interval-seconds", type=_positive, default=15.0, metavar="S",
                   help="seconds between scheduler ticks (default 15)")
    p.add_argument("--drain-timeout-seconds", type=_non_negative, default=60.0, metavar="S",
                   help="on shutdown, how long a running child may take to finish (default 60)")
    p.add_argument("--webhook-rate", type=_positive, default=10.0, metavar="PER_S",
                   help="webhook requests accepted per second, sustained (default 10)")
    p.add_argument("--webhook-burst", type=int, default=20, metavar="N",
                   help="webhook requests absorbed at once before 429 (default 20)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a Host name the server answers for besides localhost and its own address, e.g. "
                   "the public name a reverse proxy forwards (repeatable; default: env "
                   "ROCKY_SERVE_ALLOWED_HOSTS, comma-separated); other Host headers get 421")
    p.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin (scheme://host[:port]) allowed to send POSTs besides the "
                   "server's own (repeatable; default: env ROCKY_SERVE_ALLOWED_ORIGINS, comma-separated); "
                   "other origins get 403")
    p.add_argument("--max-connections", type=_at_least(1), default=64, metavar="N",
                   help="connections served at once; one more is answered 503 and closed (default 64)")
    p.add_argument("--max-header-bytes", type=_at_least(1024), default=32768, metavar="N",
                   help="size of a request's head (request line and headers); more is answered 431 "
                   "before it is buffered (default 32768)")
    p.add_argument("--request-timeout-seconds", type=_positive, default=10.0, metavar="S",
                   help="a request's head and body must arrive within S seconds of the connection "
                   "opening (or of the previous response); a slower client gets 408 (default 10)")
    # Fixed at 60 s in production (the deployment contract counts on it); tests shrink it.
    p.add_argument("--kill-grace-seconds", type=_non_negative, default=60.0, help=argparse.SUPPRESS)


def execute(args: argparse.Namespace) -> Any:
    import os

    from rocky_engine.errors import UsageError
    from rocky_engine.server.guard import normalize_allowed_host, normalize_origin
    from rocky_engine.server.settings import (
        ALLOWED_HOSTS_ENV,
        ALLOWED_ORIGINS_ENV,
        TOKEN_ENV,
        WEBHOOK_SECRET_ENV,
        RequestLimits,
        ServerSettings,
        is_loopback,
        parse_secrets,
    )

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(args.host) and not token:
        raise UsageError(
            f"refusing to serve on {args.host} without a token: anyone who can reach it could run pipelines",
            hint=f"pass --token or set {TOKEN_ENV}, or bind 127.0.0.1",
        )
    if args.webhook_burst < 1:
        raise UsageError(f"--webhook-burst must be at least 1, got {args.webhook_burst}")
    try:
        hosts = _listed(args.allowed_host, os.environ.get(ALLOWED_HOSTS_ENV), normalize_allowed_host)
        origins = _listed(args.allowed_origin, os.environ.get(ALLOWED_ORIGINS_ENV), normalize_origin)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    limits = RequestLimits(
        max_header_bytes=args.max_header_bytes,
        max_connections=args.max_connections,
        request_timeout_seconds=args.request_timeout_seconds,
    )
    settings = ServerSettings(
        config_path=_config_path(args.config),
        host=args.host,
        port=args.port,
        token=token,
        scheduler=args.scheduler,
        poll_interval_seconds=args.poll_interval_seconds,
        drain_timeout_seconds=args.drain_timeout_seconds,
        kill_grace_seconds=args.kill_grace_seconds,
        webhook_secrets=parse_secrets(os.environ.get(WEBHOOK_SECRET_ENV)),
        webhook_rate_per_second=args.webhook_rate,
        webhook_burst=args.webhook_burst,
        state_path=args.state_path,
        state_namespace=args.state_namespace,
        allowed_hosts=hosts,
        allowed_origins=origins,
        limits=limits,
    )
    from rocky_engine.server.serve_process import serve

    return serve(settings)


def _listed(flags: list[str], env: str | None, normalize: Any) -> tuple[str, ...]:
    """The flag's values when given, else the comma-separated environment variable; normalized, unique.

    Raises:
        ValueError: a value ``normalize`` refuses (its message names the flag).
    """
    raw = flags if flags else [v for v in (env or "").split(",") if v.strip()]
    return tuple(dict.fromkeys(normalize(v) for v in raw))


def _config_path(text: str) -> Any:
    from pathlib import Path

    # Absolute: children and the project reload must not depend on the server's working directory later.
    return Path(text).absolute()
