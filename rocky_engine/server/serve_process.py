"""Start one ``rocky serve`` process: load, bind, sweep, serve, drain.

Startup order matters: the project loads and the store's schema is checked (a store newer than this
engine is refused, like every inspection command), the listener is bound by us (a port in use is a clean
error, ``--port 0`` picks a free one), the job sweep finalizes what a previous server left unfinished, and
only once uvicorn reports the server up does the scheduler's first tick run.
"""

from __future__ import annotations

import socket

from starlette.applications import Starlette

from rocky_engine.errors import RockyError, StateLockedError
from rocky_engine.logs import get_logger
from rocky_engine.output import Result
from rocky_engine.project import load_project
from rocky_engine.server.app import create_app
from rocky_engine.server.context import build_context
from rocky_engine.server.drain import Drain, DrainingServer
from rocky_engine.server.guard import RequestPolicy
from rocky_engine.server.protocol import BoundedConfig
from rocky_engine.server.scheduler_loop import SchedulerLoop
from rocky_engine.server.settings import MAX_JOB_BODY_BYTES, MAX_WEBHOOK_BODY_BYTES, ServerSettings
from rocky_engine.state.store import StateStore
from rocky_engine.wire.server import ServeResult

log = get_logger("server")


class ServeOutput(ServeResult, Result):
    """What ``rocky serve`` writes on exit (the document is ``rocky_engine.wire.server.ServeResult``)."""

    def render_table(self) -> str:
        extra = " (a running child was terminated by the drain)" if self.child_terminated else ""
        return f"rocky serve on {self.address} stopped after draining{extra}\n"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``0`` picks a free port).

    Raises:
        RockyError: the address cannot be resolved or bound.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RockyError(f"cannot resolve --host {host}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # Like every server: a restart may bind while the old socket lingers in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise RockyError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pick another --port, or stop the process that holds it",
        ) from None
    sock.set_inheritable(False)
    return sock


def _url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _announce(settings: ServerSettings, url: str) -> None:
    if settings.scheduler and settings.webhook_secrets:
        hooks = f"signed ({len(settings.webhook_secrets)} secret(s))"
    elif settings.unsigned_webhooks:
        hooks = "UNSIGNED (loopback without ROCKY_WEBHOOK_SECRET; only from clients that send no Origin)"
    elif settings.scheduler and settings.loopback:
        hooks = "off (ROCKY_WEBHOOK_SECRET required because a token is configured)"
    elif settings.scheduler:
        hooks = "off (ROCKY_WEBHOOK_SECRET required off loopback)"
    else:
        hooks = "off"
    log.info(
        "rocky serve listening on %s (scheduler: %s, webhooks: %s, auth: %s)", url,
        f"every {settings.poll_interval_seconds:g} s" if settings.scheduler else "off", hooks,
        "bearer token" if settings.token else "none (loopback only)",
    )
    if settings.scheduler and not settings.webhooks_enabled:
        log.info("the webhook route answers 404 until ROCKY_WEBHOOK_SECRET is set (%s)",
                 "a token is configured" if settings.token else "the server is not on loopback")
    log.info("security: %s", RequestPolicy(settings).describe())
    limits = settings.limits
    log.info(
        "limits: request head %d bytes, %d headers, request target %d bytes, %d connections, %g s to send "
        "a request, %d s keep-alive; bodies: %d bytes for jobs, %d for webhooks",
        limits.max_header_bytes, limits.max_headers, limits.max_request_line_bytes, limits.max_connections,
        limits.request_timeout_seconds, limits.keep_alive_seconds, MAX_JOB_BODY_BYTES, MAX_WEBHOOK_BODY_BYTES,
    )


def uvicorn_config(app: Starlette, settings: ServerSettings) -> BoundedConfig:
    """uvicorn's configuration for ``app`` (made by ``create_app``): Rocky's bounded protocol and limits."""
    return BoundedConfig(
        app,
        settings.limits,
        app.state.refusals,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=int(settings.drain_timeout_seconds + 0.999),
    )


def serve(settings: ServerSettings) -> ServeOutput:
    """Run the server until a signal drains it.

    Raises:
        RockyError: the config does not load, the store is newer than this engine, the bind fails.
    """
    project = load_project(
        settings.config_path, state_path=settings.state_path, state_namespace=settings.state_namespace
    )
    # An inspection-style check: a store written by a newer engine is refused before anything starts.
    with StateStore.open(project.state_path(), writer=False):
        pass
    sock = bind(settings.host, settings.port)
    url = _url(sock, settings.host)
    loop: SchedulerLoop | None = None
    try:
        ctx = build_context(settings, project)
        ctx.address = url
        try:
            ctx.jobs.sweep()
        except StateLockedError:  # pragma: no cover - sweep() reports a busy store itself
            pass
        loop = SchedulerLoop(ctx) if settings.scheduler else None
        drain = Drain(ctx, loop)
        app = create_app(ctx, drain)
        config = uvicorn_config(app, settings)
        server = DrainingServer(config, drain, on_ready=lambda: _announce(settings, url))
        if loop is not None:
            loop.start()  # it waits for the server to be up before its first tick
        server.run(sockets=[sock])
    finally:
        if loop is not None:
            loop.request_stop()
        sock.close()
    return ServeOutput(address=url, scheduler=settings.scheduler, child_terminated=drain.terminated_child)
