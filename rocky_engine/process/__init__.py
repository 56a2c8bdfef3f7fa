"""The one launcher of child processes: every program rocky starts goes through here.

Users: the scheduler's spawner (``rocky run`` children of ``rocky tick`` and ``rocky serve``, API jobs),
command hooks, and child connectors. ``dagster_rocky`` has its own (it imports only ``rocky_engine.wire``).

What a child gets
    Its own session and process group (a Ctrl-C on rocky's terminal does not reach it), the stdin bytes or
    file it was given, stdout/stderr as line callbacks, a file, rocky's own stream or /dev/null, its cwd,
    exactly the environment it was given, and optional rlimits applied before exec.

How it is stopped
    :meth:`Child.stop` (from any thread or a signal handler), a timeout, or :func:`stop_all` (the run's
    InterruptGuard calls it, so SIGTERM/SIGINT, a drain and ``timeout_minutes`` stop a run's hooks too):
    SIGTERM to the program's process group and to every process under it, ``grace`` seconds, then SIGKILL
    to all of them until none is left. A program that exits and leaves processes behind has them stopped
    the same way: a child has ended when its program has, and nothing it started is still running.

Why a supervisor, and why not ``PR_SET_PDEATHSIG``
    Children must not outlive rocky, even when rocky is killed with ``kill -9``. ``PR_SET_PDEATHSIG``
    fires when the *thread* that forked the child exits, not the process, and rocky forks from worker
    threads (DAG workers firing hooks, the scheduler loop, server job threads); it also reaches only the
    direct child, not the workers it forked or the real worker behind a wrapper script that does not
    ``exec``. So each child runs under a small supervisor (``supervisor.py``: standard library only, no
    site-packages, no ``PYTHON*`` variables) that holds the read end of a pipe whose only write end is in
    rocky. The kernel closes that end when rocky's process dies, however it dies and
    whichever thread started the child; the supervisor reads EOF and stops the program's processes
    (SIGTERM, ``death_grace`` = 1 s by default, SIGKILL). The supervisor is also a child subreaper
    (``PR_SET_CHILD_SUBREAPER``), so a process that double-forks or whose parent exits is re-parented to
    it instead of to init: the stop covers the supervisor's whole subtree, not only the process group.

What still escapes (this is not a sandbox)
    A process that calls ``setsid`` or ``setpgid`` leaves the program's group, but not the supervisor's
    subtree: it still gets the SIGTERM and the SIGKILL, one by one. What does escape: a process that kills
    the supervisor (same user) before rocky stops it; a process started by someone else on the program's
    behalf (``systemd-run``, ``at``, a container daemon, ``ssh`` to another host); and on platforms
    without ``PR_SET_CHILD_SUBREAPER`` or ``/proc`` (macOS), anything that left the process group. A
    process in uninterruptible sleep dies only when it wakes; it is reported as a survivor.

Cost
    A supervisor of its own would be one Python start-up (plus ``ctypes``) per child. Instead each rocky
    process starts one fork server (``forkserver.py``, ``python -I -S``) at its first child, and every
    supervisor is a fork of it: the first child of a process pays the start-up (~50-100 ms on a loaded
    2-core machine), later ones a couple of forks (a median of ~15-20 ms more than a bare
    ``subprocess.run`` of ``sh -c true`` at load 9, mostly waiting for the CPU). A command that starts no
    child pays nothing: ``subprocess`` and ``socket`` are imported on the first start.

Files
    ``launcher.py`` (rocky's side: :func:`start`, :class:`Child`, :func:`stop_all`), ``forkserver_client.py``
    (starting and reaching the fork server), ``forkserver.py`` and ``supervisor.py`` (the programs),
    ``removal.py`` (removing a tree a program wrote, shared with ``connectors/scratch.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocky_engine.process.launcher import (
        DEATH_GRACE_SECS,
        DEFAULT_GRACE_SECS,
        MAX_LINE_BYTES,
        Child,
        ChildExit,
        Launch,
        LineSink,
        Output,
        Rlimit,
        live_children,
        run,
        start,
        stop_all,
    )

__all__ = [
    "DEATH_GRACE_SECS",
    "DEFAULT_GRACE_SECS",
    "MAX_LINE_BYTES",
    "Child",
    "ChildExit",
    "Launch",
    "LineSink",
    "Output",
    "Rlimit",
    "live_children",
    "run",
    "start",
    "stop_all",
]


def __getattr__(name: str) -> object:
    """The launcher's names, loaded on first use (PEP 562).

    ``rocky_engine.process.identity`` is imported by every run (the state's idempotency claims) and a
    replication run starts no child, so the launcher (fork server client, supervisor framing) stays out
    of its start-up until something launches or stops a child.
    """
    if name in __all__:
        from rocky_engine.process import launcher

        return getattr(launcher, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
