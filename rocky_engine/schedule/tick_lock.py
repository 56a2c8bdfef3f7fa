"""The tick lock: ``.rocky/tick.lock`` (non-blocking flock) plus ``.rocky/tick.lock.heartbeat``.

One reconciler ticks at a time. The holder keeps the heartbeat's mtime fresh from a thread; a tick that
finds the lock held looks at the heartbeat: fresh means a tick is in progress (skip the whole tick), older
than ``stale_after`` (300 s) means the holder is wedged (a kernel lock is never released by a hung process),
and the tick proceeds without the flock as ``lock_overridden``. The lock only avoids contention;
correctness lives in the claims, which a lock cannot bypass.

After an override the flock still belongs to the wedged process, so the heartbeat keeps naming it
(``wedged``: its pid, host, when it took the lock and its last heartbeat) through the override's own
heartbeat, its release and every later override, until the flock is free again. Whoever reports the lock
(doctor, the server) then names the process to restart and its real age, never a tick that has exited.

A short mutex (an exclusive flock on the heartbeat file itself) covers "take the lock and stamp the
heartbeat" and "release and mark the heartbeat released", so nobody can observe a held lock whose holder
has not stamped its heartbeat yet (that would read as wedged and trigger a needless override), and a
probe (``inspect_tick_lock``, used by doctor and the server) never makes a real tick lose the race.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rocky_engine.wire.schedule import TickHeartbeat, WedgedHolder
from rocky_engine.wire.schedule import TickLockState as LockState

STALE_AFTER_SECONDS = 300.0
HEARTBEAT_INTERVAL_SECONDS = 10.0
#: How long to wait for the heartbeat mutex (held for microseconds by a healthy process).
MUTEX_WAIT_SECONDS = 2.0

AcquireOutcome = Literal["acquired", "overridden", "in_progress"]

LOCK_NAME = "tick.lock"
HEARTBEAT_NAME = "tick.lock.heartbeat"


@contextlib.contextmanager
def _mutex(fd: int, wait_seconds: float = MUTEX_WAIT_SECONDS) -> Iterator[bool]:
    """Yield True while holding the heartbeat mutex, False when it could not be taken in time."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(0.005)
    try:
        yield True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _write_heartbeat(fd: int, payload: TickHeartbeat, mtime: float | None = None) -> None:
    data = json.dumps(payload.wire(), separators=(",", ":")).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    if mtime is not None:
        os.utime(fd, (mtime, mtime))


class TickLock:
    """Acquire with :meth:`acquire`; always :meth:`release` (also usable as a context manager)."""

    def __init__(
        self,
        dot_rocky: Path,
        *,
        stale_after: float = STALE_AFTER_SECONDS,
        heartbeat_interval: float = HEARTBEAT_INTERVAL_SECONDS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.dot_rocky = dot_rocky
        self.lock_path = dot_rocky / LOCK_NAME
        self.heartbeat_path = dot_rocky / HEARTBEAT_NAME
        self.stale_after = stale_after
        self.heartbeat_interval = heartbeat_interval
        self._wall = wall
        self._lock_fd: int | None = None
        self._hb_fd: int | None = None
        self._holds_flock = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.outcome: AcquireOutcome | None = None
        #: after an override: seconds since the wedged holder's last heartbeat
        self.overridden_age: float | None = None
        #: after an override: the process that still holds the flock
        self.wedged: WedgedHolder | None = None

    def acquire(self) -> AcquireOutcome:
        """Take the lock, take over a wedged one, or report that a tick is in progress."""
        self.dot_rocky.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        self._lock_fd = os.open(self.lock_path, flags, 0o644)
        self._hb_fd = os.open(self.heartbeat_path, flags, 0o644)
        proceed = False
        with _mutex(self._hb_fd) as held:
            if held:
                try:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self._holds_flock = proceed = True
                except BlockingIOError:
                    now = self._wall()
                    mtime = os.fstat(self._hb_fd).st_mtime
                    if now - mtime > self.stale_after:
                        self.wedged = _wedged_holder(_read_heartbeat(self._hb_fd), mtime, now)
                        last = self.wedged.last_heartbeat_at
                        self.overridden_age = now - last if last is not None else None
                        proceed = True
                if proceed:
                    _write_heartbeat(self._hb_fd, self._payload(), self._wall())
        if not proceed:
            self._close()
            self.outcome = "in_progress"
            return "in_progress"
        self.outcome = "acquired" if self._holds_flock else "overridden"
        self._thread = threading.Thread(target=self._beat, name="rocky-tick-heartbeat", daemon=True)
        self._thread.start()
        return self.outcome

    def _payload(self) -> TickHeartbeat:
        return TickHeartbeat(
            pid=os.getpid(), hostname=socket.gethostname(), acquired_at=self._wall(),
            overridden=not self._holds_flock, wedged=self.wedged,
        )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            fd = self._hb_fd
            if fd is None:
                return
            now = self._wall()
            with contextlib.suppress(OSError):
                os.utime(fd, (now, now))

    def release(self) -> None:
        """Stop the heartbeat, mark it released (mtime 0: stale at once) and drop the flock."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._hb_fd is not None and self.outcome in ("acquired", "overridden"):
            # Marked stale so that after an override the next tick takes over at once rather than waiting
            # out a fresh-looking heartbeat while the wedged process still holds the flock.
            with _mutex(self._hb_fd), contextlib.suppress(OSError):
                # After an override the wedged process still holds the flock: keep naming it.
                released = TickHeartbeat(
                    pid=os.getpid(), released=True, overridden=True if self.wedged else None,
                    wedged=self.wedged,
                )
                _write_heartbeat(self._hb_fd, released, 0.0)
                if self._holds_flock and self._lock_fd is not None:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                    self._holds_flock = False
        self._close()

    def _close(self) -> None:
        for attr in ("_lock_fd", "_hb_fd"):
            fd = getattr(self, attr)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, attr, None)
        self._holds_flock = False

    def __enter__(self) -> TickLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True)
class TickLockInfo:
    """What ``inspect_tick_lock`` sees: the state plus the heartbeat's age and holder."""

    state: LockState
    #: seconds since the holder's last heartbeat; for a lock a tick overrode, the wedged holder's own
    #: last heartbeat (the overriding tick's heartbeat is not the holder's)
    heartbeat_age_seconds: float | None = None
    holder_pid: int | None = None
    holder_hostname: str | None = None
    #: epoch seconds at which the holder took the lock, when known
    holder_acquired_at: float | None = None
    #: epoch seconds of the first override of this holder's lock, when a tick overrode it
    overridden_at: float | None = None


def inspect_tick_lock(
    dot_rocky: Path, *, stale_after: float = STALE_AFTER_SECONDS, wall: Callable[[], float] = time.time
) -> TickLockInfo:
    """free | held | wedged | never, without ever making a real tick skip (see the module docstring)."""
    lock_path = dot_rocky / LOCK_NAME
    hb_path = dot_rocky / HEARTBEAT_NAME
    if not lock_path.exists():
        return TickLockInfo("never")
    try:
        lock_fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return TickLockInfo("never")
    hb_fd: int | None = None
    try:
        with contextlib.suppress(OSError):
            hb_fd = os.open(hb_path, os.O_RDONLY | os.O_CLOEXEC)
        with contextlib.ExitStack() as stack:
            if hb_fd is not None:
                stack.enter_context(_mutex(hb_fd))
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                held = True
            else:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
                held = False
            age, beat = _heartbeat_facts(hb_fd, wall)
        if not held:
            return TickLockInfo("free", age)
        stale = age is None or age > stale_after
        if beat.wedged is not None:
            # the flock is the wedged holder's, also while an overriding tick beats its own heartbeat
            # (that tick may run a child for an hour: the wedged process is still there to restart)
            w = beat.wedged
            last = w.last_heartbeat_at
            return TickLockInfo(
                "wedged", wall() - last if last is not None else None, w.pid, w.hostname, w.acquired_at,
                w.overridden_at,
            )
        if stale and beat.released:
            # a release without ``wedged`` (an older engine's override): its writer has exited and the
            # holder is unknown; its mtime 0 is no age
            return TickLockInfo("wedged")
        return TickLockInfo("wedged" if stale else "held", age, beat.pid, beat.hostname, beat.acquired_at)
    finally:
        os.close(lock_fd)
        if hb_fd is not None:
            os.close(hb_fd)


def holder_text(pid: int | None, hostname: str | None) -> str:
    """``pid 24855 on vm-3``, or ``an unknown process`` (what doctor and the tick's log name)."""
    holder = f"pid {pid}" if pid else "an unknown process"
    return f"{holder} on {hostname}" if hostname else holder


def age_text(seconds: float | None) -> str:
    """``last heartbeat 401 s ago`` or ``no readable heartbeat``."""
    return f"last heartbeat {seconds:.0f} s ago" if seconds is not None else "no readable heartbeat"


def _heartbeat_facts(fd: int | None, wall: Callable[[], float]) -> tuple[float | None, TickHeartbeat]:
    if fd is None:
        return None, TickHeartbeat()
    return wall() - os.fstat(fd).st_mtime, _read_heartbeat(fd)


def _read_heartbeat(fd: int) -> TickHeartbeat:
    try:
        return TickHeartbeat.model_validate_json(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return TickHeartbeat()


def _wedged_holder(beat: TickHeartbeat, mtime: float, now: float) -> WedgedHolder:
    """Who holds the flock a tick is about to override: named by an earlier override (its heartbeat, or
    its release, carries it on), else the writer of the stale heartbeat, whose mtime is its last beat."""
    if beat.wedged is not None:
        return beat.wedged
    if beat.released:  # an older engine's release after an override: the holder is not named
        return WedgedHolder(overridden_at=now)
    return WedgedHolder(
        pid=beat.pid, hostname=beat.hostname, acquired_at=beat.acquired_at, last_heartbeat_at=mtime,
        overridden_at=now,
    )
