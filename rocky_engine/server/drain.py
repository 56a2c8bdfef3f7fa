"""Graceful shutdown: SIGTERM / Ctrl-C drains the server instead of killing it.

::

  SIGTERM ──▶ drain the child ──▶ SIGTERM the child ──▶ SIGKILL
              --drain-timeout-seconds   60 s, fixed

On the first signal the server stops starting work (no new tick, ``POST /api/v1/jobs/run`` answers 503),
stops accepting connections and lets in-flight HTTP requests finish, all within the same drain window. A
child still running when the window closes gets SIGTERM, then SIGKILL 60 s later (the spawner's kill grace);
a child that hits its own ``timeout_minutes`` first is stopped by the spawner as usual, so a drain never
extends a run beyond its own timeout. A child the drain terminated is recorded as failed and gets no
incident bundle (a graceful shutdown is not an incident); a second signal skips the rest of the window.

:class:`DrainingServer` is uvicorn's server with the signal handling replaced: it starts the drain, tells
the scheduler when the listener is up, and does not re-raise the signal afterwards, so a completed drain
exits 0.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Generator
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from rocky_engine.logs import get_logger

if TYPE_CHECKING:
    import socket

    from rocky_engine.server.context import ServerContext
    from rocky_engine.server.scheduler_loop import SchedulerLoop

log = get_logger("server")

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Drain:
    """Coordinates one shutdown; :meth:`begin` is idempotent and safe from a signal handler."""

    def __init__(self, ctx: ServerContext, loop: SchedulerLoop | None, *, poll_seconds: float = 0.05) -> None:
        self.ctx = ctx
        self.loop = loop
        self.poll_seconds = poll_seconds
        self._begun = threading.Event()
        self._forced = threading.Event()
        self._timer: threading.Thread | None = None
        #: the drain terminated a running child (it ends as a failed job, without an incident)
        self.terminated_child = False

    @property
    def begun(self) -> bool:
        return self._begun.is_set()

    def begin(self, reason: str = "shutdown") -> None:
        if self._begun.is_set():
            return
        self._begun.set()
        self.ctx.draining.set()
        if self.loop is not None:
            self.loop.request_stop()
        timeout = self.ctx.settings.drain_timeout_seconds
        log.info("%s: draining (no new work; a running child gets up to %s s to finish)", reason, timeout)
        self._timer = threading.Thread(target=self._deadline, name="rocky-drain", daemon=True)
        self._timer.start()

    def force(self) -> None:
        """A second signal: stop waiting and terminate the running child now."""
        self._forced.set()

    def _idle(self) -> bool:
        return not self.ctx.gate.busy

    def _deadline(self) -> None:
        end = time.monotonic() + self.ctx.settings.drain_timeout_seconds
        while time.monotonic() < end and not self._forced.is_set():
            if self._idle():
                return
            time.sleep(self.poll_seconds)
        if self._idle():
            return
        self.terminated_child = True
        log.warning(
            "drain window over with a run still going: sending it SIGTERM, SIGKILL in %s s; it is "
            "recorded as failed and not retried", self.ctx.settings.kill_grace_seconds,
        )
        self.ctx.spawner.terminate(drained=True)

    def wait(self) -> None:
        """Block until no child runs: the scheduler loop and API jobs have ended (at worst the drain
        window plus the kill grace), then write what is left to write."""
        self.begin()
        if self.loop is not None:
            self.loop.join()
        self.ctx.jobs.join()
        if self._timer is not None:
            self._timer.join()
        self.ctx.jobs.stop_watching()
        self.ctx.jobs.flush()
        log.info("drained; exiting")


class DrainingServer(uvicorn.Server):
    """uvicorn's server with Rocky's drain on SIGTERM / SIGINT."""

    def __init__(
        self, config: uvicorn.Config, drain: Drain, on_ready: Callable[[], None] | None = None
    ) -> None:
        super().__init__(config)
        self.drain = drain
        self.on_ready = on_ready

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)
        # Unlike uvicorn, the signal is not re-raised: the drain has handled it and the exit is clean.

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            log.warning("second %s: terminating the running child now", signal.Signals(sig).name)
            self.drain.force()
            return
        self.should_exit = True
        self.drain.begin(signal.Signals(sig).name)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            self.drain.ctx.started.set()
            # Announced only now: the drain handlers are installed, so a signal after the announcement
            # always drains instead of interrupting a half-started server.
            if self.on_ready is not None:
                self.on_ready()
