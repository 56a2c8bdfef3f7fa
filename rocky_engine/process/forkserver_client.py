"""Rocky's side of the fork server (``forkserver.py``): start it on first use, hand it a child's descriptors.

One server per rocky process (a forked copy of rocky starts its own). A server that died is replaced at the
next request; a request it swallowed without forking shows up as the child's status pipe closing
unanswered, which :func:`launcher.start` reports as a start failure.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket
    import subprocess

_DIR = str(Path(__file__).resolve().parent)
# Imported rather than run as a script, so its byte code is cached; -I -S: no site-packages, no PYTHON*.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); import forkserver; sys.exit(forkserver.serve(sys.argv[2:]))"
)


class ForkServer:
    """The fork server of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = 0
        self._sock: socket.socket | None = None
        self._lifeline = -1
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def request(self, fds: Sequence[int]) -> None:
        """Ask for a supervisor on ``fds`` (stdin, stdout, stderr, control, status); the server holds its own
        copies once this returns, so the caller closes its ends.

        Raises:
            OSError: the server cannot be started or reached (after one restart).
        """
        import array
        import socket

        message = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        with self._lock:
            for attempt in (1, 2):
                sock = self._ensure()
                try:
                    sock.sendmsg([b"F"], message)
                    return
                except OSError:
                    self._discard()
                    if attempt == 2:
                        raise

    def _ensure(self) -> socket.socket:
        proc = self._proc
        if self._sock is not None and self._owner == os.getpid() and proc is not None and proc.poll() is None:
            return self._sock
        self._discard()
        import socket
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        life_r, life_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _BOOT, _DIR, str(theirs.fileno()), str(life_r)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(), life_r), close_fds=True,
                # nothing of rocky's environment: each program's own travels in its spec
                env={},
            )
        except BaseException:
            ours.close()
            os.close(life_w)
            raise
        finally:
            theirs.close()
            os.close(life_r)
        self._sock, self._lifeline, self._owner = ours, life_w, os.getpid()
        return ours

    def _discard(self) -> None:
        """Forget the current server (it died, or this is a forked copy of rocky); reap it if it is ours."""
        if self._sock is not None:
            self._sock.close()
        if self._lifeline >= 0:
            os.close(self._lifeline)  # EOF: a server still alive exits
        proc, owned = self._proc, self._owner == os.getpid()
        self._sock, self._lifeline, self._proc = None, -1, None
        if proc is not None and owned:
            try:
                proc.wait(timeout=5)
            except Exception:
                proc.kill()
                proc.wait()


    def close(self) -> None:
        """Stop the server and wait for it (a no-op when none runs). A thread stuck mid-request holds the
        lock: then the server is left to exit at the lifeline's EOF as before."""
        if self._lock.acquire(timeout=1):
            try:
                self._discard()
            finally:
                self._lock.release()


#: the one fork server of this process
FORK_SERVER = ForkServer()
# The server would exit by itself at the lifeline's EOF, but only a moment after rocky is gone: whoever
# waits for rocky (a test, a service manager counting the unit's processes) would see it outlive rocky.
atexit.register(FORK_SERVER.close)
