"""The fork server: one per rocky process, it forks a fresh supervisor for each child rocky starts.

A supervisor started as its own ``python -I -S`` costs a Python start-up plus ``ctypes`` for ``prctl``
(about 12 ms on an idle 2-core machine, ten times that under load) for every hook and every connector
attempt. So rocky starts this program once (``python -I -S``, standard library only, imports warmed) and
asks it for each child: one datagram on a Unix socket carrying five descriptors (the child's stdin, stdout
and stderr, and the supervisor's control and status pipes, see ``supervisor.py``). The server forks; the
fork puts the three on 0/1/2 and runs the supervisor exactly as the stand-alone program would. Rocky never
talks to the server again about that child: everything else goes through the two pipes, and the
supervisor does not need the server once it runs.

The server exits when the read end of its own lifeline pipe reads EOF, i.e. when rocky is gone; supervisors
it forked keep supervising their children (each has its own control pipe from rocky, which closes at the
same moment). It ignores SIGINT/SIGTERM/SIGHUP/SIGQUIT like the supervisors, and reaps them.
"""

from __future__ import annotations

import _signal as signal
import os
import select
import sys

try:
    from rocky_engine.process import supervisor
except ImportError:  # run as the program: only this directory is on sys.path
    import supervisor  # type: ignore[no-redef]

#: descriptors per request, in order: stdin, stdout, stderr, control, status
FDS_PER_REQUEST = 5


def serve(argv: list[str]) -> int:
    import _socket

    sock_fd, lifeline = int(argv[0]), int(argv[1])
    for fd in (sock_fd, lifeline):
        os.set_inheritable(fd, False)
    for sig in supervisor.IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    supervisor.warm_up()
    sock = _socket.socket(fileno=sock_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    poller = select.poll()
    for fd in (sock_fd, lifeline, wake_r):
        poller.register(fd, select.POLLIN)
    space = _socket.CMSG_SPACE(FDS_PER_REQUEST * 4)
    while True:
        for fd, _event in poller.poll():
            if fd == lifeline and not os.read(lifeline, 64):
                return 0
            if fd == wake_r:
                supervisor.drain(wake_r)
                _reap()
            if fd == sock_fd:
                _data, ancillary, _flags, _addr = sock.recvmsg(16, space)
                fds = _received_fds(ancillary, _socket.SOL_SOCKET, _socket.SCM_RIGHTS)
                if len(fds) == FDS_PER_REQUEST:
                    _fork_supervisor(fds, (sock_fd, lifeline, wake_r, wake_w))
                for received in fds:
                    os.close(received)


def _received_fds(ancillary: list[tuple[int, int, bytes]], level: int, kind: int) -> list[int]:
    fds: list[int] = []
    for cmsg_level, cmsg_type, data in ancillary:
        if (cmsg_level, cmsg_type) == (level, kind):
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, usable, 4)]
    return fds


def _fork_supervisor(fds: list[int], server_fds: tuple[int, ...]) -> None:
    try:
        pid = os.fork()
    except OSError:
        return  # the child's status pipe closes unanswered: rocky reports that it could not start it
    if pid != 0:
        return
    code = 70
    try:  # the supervisor: it must never return into the server loop
        for fd in server_fds:
            os.close(fd)
        stdin, stdout, stderr, control, status = fds
        for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(fd, target)
        for fd in (stdin, stdout, stderr):
            os.close(fd)
        code = supervisor.main([str(control), str(status)])
    finally:
        os._exit(code)


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
