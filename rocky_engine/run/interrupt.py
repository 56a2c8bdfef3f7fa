"""SIGINT / SIGTERM during a run: stop scheduling, cancel statements in flight, record, exit 130.

The handler only sets a flag, asks the registered sessions to interrupt their statements, and stops every
child process still running (command hooks, a connector program: SIGTERM, their grace, SIGKILL), so a run
stopped by a drain or ``timeout_minutes`` ends in about the children's grace, not their duration. The
runner then finishes its bookkeeping (run record, idempotency finalization) on the normal code path, so an
interrupted run is recorded like any other.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

#: imported only by code that starts a child; until then no child can be running (see ``_stop_children``)
_LAUNCHER = "rocky_engine.process.launcher"


class InterruptGuard:
    """Context manager that turns SIGINT/SIGTERM into ``stop.is_set()`` for the duration of a run."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.signal_name: str | None = None
        self._cancels: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._previous: dict[int, Any] = {}

    def on_interrupt(self, cancel: Callable[[], None]) -> None:
        """Register a callback (e.g. ``session.interrupt``) run when a signal arrives."""
        with self._lock:
            self._cancels.append(cancel)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal_name = signal.Signals(signum).name
        self.stop.set()
        with self._lock:
            cancels = list(self._cancels)
        for cancel in cancels:
            try:
                cancel()
            except Exception:  # a failing cancel must not hide the interrupt
                pass
        _stop_children()

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def _stop_children() -> None:
    """Stop every child still running, if this process ever loaded the launcher.

    Not a module-level import: a replication run starts no child, and the launcher (fork server client,
    supervisor) is start-up time of every ``rocky run`` for nothing. A child exists only after the launcher
    module has run, so its absence from ``sys.modules`` means there is nothing to stop; importing it here,
    inside a signal handler, could contend for the import lock the interrupted main thread holds.
    """
    launcher = sys.modules.get(_LAUNCHER)
    if launcher is not None:
        launcher.stop_all()
