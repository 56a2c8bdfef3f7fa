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

#: the name of a SIGINT/SIGTERM taken before any guard was entered (``note_early_signal``)
_early_signal: str | None = None


def note_early_signal(signum: int) -> None:
    """Remember a signal that arrived before the run's guard was installed (config loading, store opening).

    The entry point's early handler raises ``KeyboardInterrupt``, which normally ends the process with 130.
    But CPython runs a pending handler wherever it next checks, and what a handler raises inside an object's
    finalizer (a file closed by garbage collection) or under an ``except BaseException`` is discarded: the
    command would then go on as if never signalled, and a drain would wait for the SIGKILL at the end of
    its grace. The next guard entered stops the run at once instead.
    """
    global _early_signal
    _early_signal = signal.Signals(signum).name


def forget_early_signal() -> None:
    """A command starts with no early signal noted (an in-process caller may run several)."""
    global _early_signal
    _early_signal = None


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
        global _early_signal
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        if _early_signal is not None:  # a signal whose KeyboardInterrupt was lost: the run stops now
            early, _early_signal = _early_signal, None
            self._handle(signal.Signals[early], None)
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
