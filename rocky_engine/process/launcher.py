"""Start a child program under a supervisor, feed it, read it, time it out, stop it, wait for it.

:func:`start` makes the program's stdin/stdout/stderr and two pipes, has the fork server fork a
supervisor on them, sends it the program's spec, and returns a :class:`Child` once the program runs (or
raises :class:`OSError`, as ``subprocess`` would, when it cannot be started). The caller's thread pumps
the program's I/O in :meth:`Child.wait` / :meth:`Child.poll_for`: it writes the stdin bytes, hands each
stdout/stderr line to a callback, and enforces the timeout. :meth:`Child.stop` and :func:`stop_all` only
write one byte to a pipe, so they are safe from any thread and from a signal handler.
"""

from __future__ import annotations

import errno
import marshal
import os
import select
import selectors
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from rocky_engine.process.forkserver_client import FORK_SERVER
from rocky_engine.process.supervisor import frame

#: Default seconds between SIGTERM and SIGKILL when a child is stopped.
DEFAULT_GRACE_SECS = 5.0
#: Default seconds between SIGTERM and SIGKILL when rocky died: nobody is left to wait for the program.
DEATH_GRACE_SECS = 1.0
#: Longest stdout/stderr piece handed to a line callback in one call.
MAX_LINE_BYTES = 64 * 1024
#: How long the supervisor may take to start the program (it is a Python start-up: slow on a loaded box).
START_TIMEOUT_SECS = 60.0
#: After the program's processes are gone, how long output still held open elsewhere is read.
DRAIN_SECS = 2.0
#: Longest sleep of the I/O loop. A signal handler (the InterruptGuard's stop, a tick's drain) runs only
#: when the main thread gets back to Python code, and the kernel may deliver a process-directed signal to
#: another thread, which does not interrupt the main thread's wait; the injected clock is re-read too.
MAX_SLEEP_SECS = 0.25

LineSink = Callable[[bytes], None]
#: Where output goes: a line callback, an open file (its descriptor is handed over), "inherit" (rocky's
#: own stream) or None (/dev/null).
Output = LineSink | IO[bytes] | Literal["inherit"] | None


@dataclass(frozen=True)
class Rlimit:
    """A ``setrlimit`` applied in the program before exec (``resource`` names, e.g. ``RLIMIT_CPU``)."""

    name: str
    soft: int
    hard: int
    #: a refusal (macOS and RLIMIT_AS) lets the program run without it instead of failing the start
    best_effort: bool = False


@dataclass(frozen=True)
class Launch:
    """Everything about one child program."""

    argv: Sequence[str]
    cwd: str | os.PathLike[str] | None = None
    #: the whole environment of the program; None: rocky's own
    env: Mapping[str, str] | None = None
    #: bytes written to its stdin (then closed), an open file, or None (/dev/null)
    stdin: bytes | IO[bytes] | None = None
    stdout: Output = None
    stderr: Output = None
    #: seconds from the start; then it is stopped (SIGTERM, grace, SIGKILL) and reported ``timed_out``
    timeout: float | None = None
    grace: float = DEFAULT_GRACE_SECS
    death_grace: float = DEATH_GRACE_SECS
    rlimits: tuple[Rlimit, ...] = ()
    #: a directory the supervisor removes if rocky dies before the program's processes are gone
    remove_on_orphan: str | os.PathLike[str] | None = None
    max_line_bytes: int = MAX_LINE_BYTES
    #: called in the waiting thread when the timeout fires, before the stop
    on_timeout: Callable[[], None] | None = None


@dataclass(frozen=True)
class ChildExit:
    """How a child ended."""

    pid: int
    #: as ``subprocess``: the exit status, or -N when killed by signal N; None when the supervisor was lost
    returncode: int | None
    timed_out: bool
    #: :meth:`Child.stop` was called (by the owner, another thread, :func:`stop_all`), not the timeout
    stopped: bool
    #: the program exited but left processes behind, which were stopped
    leftovers: bool
    duration: float
    #: processes still alive after SIGKILL (uninterruptible sleep); they are no longer supervised
    survivors: int = 0

    @property
    def exit_code(self) -> int:
        """The shell convention: 128 + N for signal N (a lost supervisor counts as SIGKILL)."""
        code = self.returncode
        if code is None:
            return 128 + signal.SIGKILL
        return code if code >= 0 else 128 - code


#: Every child of this process that has not ended yet (set operations are atomic under the GIL, so a
#: signal handler can snapshot it without a lock).
_LIVE: set[Child] = set()


def stop_all(*, now: bool = False) -> None:
    """Stop every live child of this process (safe from a signal handler): SIGTERM, grace, SIGKILL."""
    for child in tuple(_LIVE):
        child.stop(now=now)


def live_children() -> list[Child]:
    return list(_LIVE)


def run(launch: Launch, *, clock: Callable[[], float] = time.monotonic) -> ChildExit:
    """:func:`start` and :meth:`Child.wait`."""
    return start(launch, clock=clock).wait()


def start(launch: Launch, *, clock: Callable[[], float] = time.monotonic) -> Child:
    """Start ``launch`` and return once its program runs.

    Raises:
        OSError: the program cannot be started (missing executable, bad cwd, a refused rlimit, or the
            supervisor itself failed), with the errno and file name ``subprocess`` would give.
    """
    t0 = clock()
    env = dict(os.environ if launch.env is None else launch.env)
    spec = {
        "argv": [os.fspath(a) for a in launch.argv],
        "env": env,
        "cwd": None if launch.cwd is None else os.fspath(launch.cwd),
        "grace": launch.grace,
        "death_grace": launch.death_grace,
        "rlimits": [[r.name, r.soft, r.hard, r.best_effort] for r in launch.rlimits],
        "remove_on_orphan": None if launch.remove_on_orphan is None else os.fspath(launch.remove_on_orphan),
    }
    if not spec["argv"]:
        raise OSError(errno.EINVAL, "empty command line")
    ends = _Ends()
    try:
        child_fds = [ends.stdin(launch.stdin), ends.output(launch.stdout, 1), ends.output(launch.stderr, 2)]
        control_r, control_w = ends.pipe(keep="w")
        status_r, status_w = ends.pipe(keep="r")
        FORK_SERVER.request([*child_fds, control_r, status_w])
    except BaseException:
        ends.close_all()
        raise
    ends.close_theirs()
    child = Child(launch, control_w, status_r, ends.stdin_w, ends.readers, clock, t0)
    try:
        child._handshake(frame(spec))
    except BaseException:
        child._abandon()
        raise
    return child


class _Ends:
    """The descriptors of one start: the child's ends (handed to the fork server, then closed here) and
    rocky's ends (kept by the :class:`Child`)."""

    def __init__(self) -> None:
        self._theirs: list[int] = []
        self._mine: list[int] = []
        self._devnull = -1
        self.stdin_w = -1
        #: rocky's read end per line callback: stdout's and stderr's
        self.readers: dict[int, LineSink] = {}

    def pipe(self, *, keep: Literal["r", "w"]) -> tuple[int, int]:
        r, w = os.pipe()
        self._mine.append(r if keep == "r" else w)
        self._theirs.append(w if keep == "r" else r)
        return r, w

    def devnull(self) -> int:
        if self._devnull < 0:
            self._devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            self._theirs.append(self._devnull)
        return self._devnull

    def stdin(self, stdin: bytes | IO[bytes] | None) -> int:
        if stdin is None:
            return self.devnull()
        if isinstance(stdin, bytes):
            r, self.stdin_w = self.pipe(keep="w")
            return r
        return stdin.fileno()

    def output(self, output: Output, own: int) -> int:
        if output is None:
            return self.devnull()
        if output == "inherit":
            return own
        if callable(output):
            r, w = self.pipe(keep="r")
            self.readers[r] = output
            return w
        assert not isinstance(output, str)
        return output.fileno()

    def close_theirs(self) -> None:
        for fd in self._theirs:
            os.close(fd)
        self._theirs.clear()

    def close_all(self) -> None:
        self.close_theirs()
        for fd in self._mine:
            os.close(fd)
        self._mine.clear()


@dataclass
class _Stream:
    fd: int
    sink: LineSink
    limit: int
    buf: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> None:
        self.buf += data
        while True:
            cut = self.buf.find(b"\n", 0, self.limit)
            if cut >= 0:
                piece = bytes(self.buf[: cut + 1])
            elif len(self.buf) >= self.limit:
                piece = bytes(self.buf[: self.limit])
            else:
                return
            del self.buf[: len(piece)]
            self.sink(piece)

    def finish(self) -> None:
        if self.buf:
            piece, self.buf = bytes(self.buf), bytearray()
            self.sink(piece)


class Child:
    """A running child program; only the thread that calls :meth:`wait` / :meth:`poll_for` pumps it."""

    def __init__(
        self,
        launch: Launch,
        control: int,
        status: int,
        stdin: int,
        readers: dict[int, LineSink],
        clock: Callable[[], float],
        t0: float,
    ) -> None:
        self.launch = launch
        #: the program's pid (= its process group and session); 0 until it runs
        self.pid = 0
        #: the supervisor's pid (a fork of the fork server)
        self.supervisor_pid = 0
        self._control = control
        self._status = status
        self._clock = clock
        self._t0 = t0
        self._deadline = None if not launch.timeout else t0 + launch.timeout
        # Re-entrant: stop() may run in a signal handler while the main thread closes the control pipe.
        self._lock = threading.RLock()
        self._status_buf = b""
        self._exit: dict[str, Any] | None = None
        self._timed_out = False
        self._stop_requested = False
        self._drain_until: float | None = None
        self._result: ChildExit | None = None
        self._selector = selectors.DefaultSelector()
        self._stdin_data = memoryview(launch.stdin if isinstance(launch.stdin, bytes) else b"")
        self._stdin_fd = stdin
        self._readers = readers
        #: the first exception a line callback raised (re-raised once the child, stopped, has ended)
        self._sink_error: BaseException | None = None
        self._streams: dict[int, _Stream] = {}

    # ------------------------------------------------------------------ start

    def _handshake(self, spec: bytes) -> None:
        try:
            _write_all(self._control, spec)
        except OSError:
            pass  # the supervisor died at start-up: its exit status says why, below
        message = self._read_status(START_TIMEOUT_SECS)
        if message is None or message.get("event") not in ("started", "error"):
            raise OSError(None, "the process supervisor did not start the program (it exited or hung)")
        if message["event"] == "error":
            raise OSError(
                message.get("errno"), message.get("strerror") or "cannot start", message.get("filename")
            )
        self.pid = int(message["pid"])
        self.supervisor_pid = int(message["supervisor"])
        _LIVE.add(self)
        self._open_streams()
        self._status_frames()  # a quick program's exit may have come in the same read as its start

    def _read_status(self, timeout: float) -> dict[str, Any] | None:
        """Block for the next status message (start-up only)."""
        end = time.monotonic() + timeout
        while (message := self._next_frame()) is None:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._status], [], [], left)
            if not ready:
                continue
            data = os.read(self._status, 65536)
            if not data:
                return None
            self._status_buf += data
        return message

    def _next_frame(self) -> dict[str, Any] | None:
        """One status message off the buffer (a 4-byte length and a ``marshal``-ed dict), if complete."""
        buf = self._status_buf
        if len(buf) < 4 or len(buf) < 4 + (size := int.from_bytes(buf[:4], "big")):
            return None
        message: dict[str, Any] = marshal.loads(buf[4:4 + size])
        self._status_buf = buf[4 + size:]
        return message

    def _open_streams(self) -> None:
        self._selector.register(self._status, selectors.EVENT_READ)
        if self._stdin_fd >= 0:
            os.set_blocking(self._stdin_fd, False)
            if len(self._stdin_data):
                self._selector.register(self._stdin_fd, selectors.EVENT_WRITE)
            else:
                self._close_stdin()
        for fd, sink in self._readers.items():
            os.set_blocking(fd, False)
            self._streams[fd] = _Stream(fd, sink, max(1, self.launch.max_line_bytes))
            self._selector.register(fd, selectors.EVENT_READ)
        self._readers = {}

    def _abandon(self) -> None:
        """A failed start: close everything. Closing the control pipe means "rocky is gone" to a supervisor
        that did start the program, so it stops it instead of leaving it running."""
        _LIVE.discard(self)
        self._close_stdin()
        self._selector.close()
        self._close_control()
        os.close(self._status)
        for fd in [*self._readers, *self._streams]:
            os.close(fd)
        self._readers, self._streams = {}, {}

    # ------------------------------------------------------------------ stop

    def stop(self, *, now: bool = False) -> None:
        """SIGTERM to the program's processes, SIGKILL after the grace (``now``: SIGKILL at once).

        Safe from any thread and from a signal handler; a no-op once the child has ended.
        """
        self._stop_requested = True
        self._send(b"K" if now else b"S")

    def _send(self, command: bytes) -> None:
        with self._lock:
            if self._control < 0:
                return
            try:
                os.write(self._control, command)
            except OSError:
                pass  # the supervisor is already gone

    def _close_control(self) -> None:
        with self._lock:
            fd, self._control = self._control, -1
        if fd >= 0:
            os.close(fd)

    # ------------------------------------------------------------------ wait

    def wait(self) -> ChildExit:
        """Pump the child's I/O until it has ended."""
        result = self.poll_for(None)
        assert result is not None
        return result

    def poll_for(self, seconds: float | None) -> ChildExit | None:
        """Pump the child's I/O for up to ``seconds`` (None: until it ends); its result once it ended."""
        if self._result is not None:
            return self._result
        until = None if seconds is None else self._clock() + seconds
        while not self._ended():
            now = self._clock()
            if self._deadline is not None and not self._timed_out and now >= self._deadline:
                self._timed_out = True
                if self.launch.on_timeout is not None:
                    self.launch.on_timeout()
                self._send(b"S")
            if until is not None and now >= until:
                return None
            sleep = min(
                MAX_SLEEP_SECS,
                MAX_SLEEP_SECS if until is None else until - now,
                MAX_SLEEP_SECS if self._drain_until is None else self._drain_until - now,
            )
            for key, _mask in self._selector.select(max(0.0, sleep)):
                try:
                    self._ready(int(key.fd))
                except Exception as exc:  # a failing callback must not leave the program running
                    if self._sink_error is None:
                        self._sink_error = exc
                        self.stop(now=True)
        self._result = self._finish()
        if self._sink_error is not None:
            raise self._sink_error
        return self._result

    def _ended(self) -> bool:
        if self._exit is None:
            return False
        if not self._streams:
            return True
        return self._drain_until is not None and self._clock() >= self._drain_until

    def _ready(self, fd: int) -> None:
        if fd == self._status:
            self._read_status_event()
        elif fd == self._stdin_fd:
            self._write_stdin()
        else:
            stream = self._streams[fd]
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            if data:
                stream.feed(data)
            else:
                self._selector.unregister(fd)
                del self._streams[fd]
                os.close(fd)
                stream.finish()

    def _read_status_event(self) -> None:
        try:
            data = os.read(self._status, 65536)
        except BlockingIOError:
            return
        if not data:  # the supervisor is gone; without an exit message it was killed
            self._selector.unregister(self._status)
            if self._exit is None:
                self._lost()
            return
        self._status_buf += data
        self._status_frames()

    def _status_frames(self) -> None:
        while (message := self._next_frame()) is not None:
            if message.get("event") == "exit":
                self._exit = message
                self._drain_until = self._clock() + DRAIN_SECS

    def _lost(self) -> None:
        # Something killed the supervisor. The program's group id is still its own while any member lives,
        # so one SIGKILL to it is the last thing rocky can do for the processes that stayed in the group.
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._exit = {"returncode": None, "stopped": self._stop_requested, "leftovers": False, "survivors": 0}
        self._drain_until = self._clock() + DRAIN_SECS

    def _write_stdin(self) -> None:
        try:
            written = os.write(self._stdin_fd, self._stdin_data[:65536])
        except BlockingIOError:
            return
        except OSError:  # the program does not read its stdin: it simply never sees the rest
            self._close_stdin()
            return
        self._stdin_data = self._stdin_data[written:]
        if not len(self._stdin_data):
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self._stdin_fd < 0:
            return
        if self._stdin_fd in self._selector.get_map():
            self._selector.unregister(self._stdin_fd)
        os.close(self._stdin_fd)
        self._stdin_fd = -1

    def _finish(self) -> ChildExit:
        exit_ = self._exit or {}
        for fd, stream in list(self._streams.items()):
            os.close(fd)
            stream.finish()
        self._streams.clear()
        self._close_stdin()
        self._selector.close()
        os.close(self._status)
        self._close_control()
        _LIVE.discard(self)
        return ChildExit(
            pid=self.pid,
            returncode=exit_.get("returncode"),
            timed_out=self._timed_out,
            stopped=self._stop_requested,
            leftovers=bool(exit_.get("leftovers")),
            duration=self._clock() - self._t0,
            survivors=int(exit_.get("survivors") or 0),
        )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
