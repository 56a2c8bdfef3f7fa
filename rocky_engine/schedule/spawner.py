"""Run one scheduled child: ``rocky -c <config> --state-path <abs> run --pipeline P --output json``.

The child gets ``ROCKY_RUN_TRIGGER`` (schedule | webhook) and ``ROCKY_SUBMISSION_ID`` so its run record
joins the tick that launched it, and is started through the launcher (``rocky_engine.process``): its own
process group, so a signal aimed at the reconciler does not reach it, and a stop reaches everything it
started. ``timeout_seconds`` stops it: SIGTERM to its processes (``rocky run`` records an interrupted run
and stops its own hooks), SIGKILL ``kill_grace_seconds`` (60 s; injectable for tests) later.
:meth:`SubprocessSpawner.terminate` does the same from another thread or a signal handler for a shutdown
drain; such a child is reported ``drained`` (no incident bundle). If the reconciler itself dies, even by
``kill -9``, the child gets SIGTERM and ``ORPHAN_GRACE_SECONDS`` to record its interrupted run, then
SIGKILL: a scheduled run never outlives its reconciler by more than that.

The reconciler depends only on the :class:`Spawner` protocol, so the server and tests inject their own.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal, Protocol

from rocky_engine.logs import get_logger

if TYPE_CHECKING:
    from rocky_engine.process import Child

KILL_GRACE_SECONDS = 60.0
#: SIGTERM-to-SIGKILL seconds when the reconciler died: enough for ``rocky run`` to record the interrupt.
ORPHAN_GRACE_SECONDS = 10.0
#: Exit code reported when the child could not be started at all (as a shell would).
CANNOT_START = 127
_STRIPPED_ENV = ("ROCKY_IDEMPOTENCY_KEY", "ROCKY_SUBMISSION_ID", "ROCKY_RUN_TRIGGER")

log = get_logger("schedule")

#: ``manual`` is a job the server runs on request (``POST /api/v1/jobs/run``); its record says Manual.
Trigger = Literal["schedule", "webhook", "manual"]


@dataclass(frozen=True)
class ChildRequest:
    """One child run the reconciler wants."""

    pipeline: str
    config_path: Path
    state_path: Path
    trigger: Trigger
    submission_id: str
    #: None or 0: no timeout
    timeout_seconds: float | None
    cwd: Path
    attempt: int = 1
    #: more ``rocky run`` flags (the server's ``--filter key=value``), appended after ``--output json``
    extra_args: tuple[str, ...] = ()
    #: where the child's stdout (its JSON result) goes; None discards it
    stdout_path: Path | None = None
    #: the parent's ``--state-namespace``: with ``--state-path`` it still names the remote subtree
    state_namespace: str | None = None


@dataclass(frozen=True)
class ChildResult:
    """How the child ended. ``exit_code`` follows the shell convention (128 + N for signal N)."""

    exit_code: int
    timed_out: bool = False
    #: terminated by a shutdown drain (no incident bundle)
    drained: bool = False
    started: bool = True
    pid: int | None = None
    duration_ms: int = 0


class Spawner(Protocol):
    """Runs one child to completion."""

    def run(self, request: ChildRequest, on_start: Callable[[int], None] | None = None) -> ChildResult: ...


def child_argv(request: ChildRequest, command: Sequence[str]) -> list[str]:
    return [
        *command,
        "-c", str(request.config_path),
        "--state-path", str(request.state_path),
        *(("--state-namespace", request.state_namespace) if request.state_namespace else ()),
        "run", "--pipeline", request.pipeline, "--output", "json",
        *request.extra_args,
    ]


def child_env(request: ChildRequest, base: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in _STRIPPED_ENV}
    env["ROCKY_RUN_TRIGGER"] = request.trigger
    env["ROCKY_SUBMISSION_ID"] = request.submission_id
    return env


class SubprocessSpawner:
    """The real spawner: one child process at a time, started through the launcher."""

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        kill_grace_seconds: float = KILL_GRACE_SECONDS,
        orphan_grace_seconds: float = ORPHAN_GRACE_SECONDS,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: the ``rocky`` entry point; the running interpreter by default, so the child is this engine
        default = [sys.executable, "-m", "rocky_engine.cli.main"]
        self.command = list(command) if command is not None else default
        self.kill_grace_seconds = kill_grace_seconds
        self.orphan_grace_seconds = orphan_grace_seconds
        self._env = env
        self._clock = clock
        # Re-entrant: terminate() may run in a signal handler while the main thread holds it.
        self._lock = threading.RLock()
        self._child: Child | None = None
        self._drain_requested = False

    def run(self, request: ChildRequest, on_start: Callable[[int], None] | None = None) -> ChildResult:
        from rocky_engine.process import Launch, start

        argv = child_argv(request, self.command)
        env = child_env(request, os.environ if self._env is None else self._env)

        def timed_out() -> None:
            log.error(
                "scheduled run of %s exceeded timeout_minutes (%.0f s): sending SIGTERM, SIGKILL in %.0f s",
                request.pipeline, request.timeout_seconds or 0, self.kill_grace_seconds,
            )

        try:
            with contextlib.ExitStack() as stack:
                stdout: IO[bytes] | None = None
                if request.stdout_path is not None:
                    stdout = stack.enter_context(open(request.stdout_path, "wb"))
                child = start(
                    Launch(
                        argv=argv, cwd=request.cwd, env=env, stdout=stdout, stderr="inherit",
                        timeout=request.timeout_seconds or None, grace=self.kill_grace_seconds,
                        death_grace=self.orphan_grace_seconds, on_timeout=timed_out,
                    ),
                    clock=self._clock,
                )
        except OSError as exc:
            log.error("could not start the scheduled run of %s: %s", request.pipeline, exc)
            return ChildResult(CANNOT_START, started=False)
        with self._lock:
            self._child = child
            drain_early = self._drain_requested
        if drain_early:
            child.stop()
        try:
            if on_start is not None:
                try:
                    on_start(child.pid)
                except BaseException:
                    child.stop(now=True)  # nobody would wait for it: it must not run unwatched
                    child.wait()
                    raise
            done = child.wait()
        finally:
            with self._lock:
                self._child = None
        if done.survivors:
            log.error("scheduled run of %s: %d process(es) survived SIGKILL", request.pipeline,
                      done.survivors)
        return ChildResult(
            done.exit_code, timed_out=done.timed_out,
            drained=self._drain_requested and done.stopped and not done.timed_out, pid=child.pid,
            duration_ms=int(done.duration * 1000),
        )

    def terminate(self, *, drained: bool = True) -> None:
        """Stop the running child: SIGTERM now, SIGKILL after the grace (safe from a signal handler).

        With ``drained`` (a shutdown), the result is flagged so no incident bundle is written. A call
        with no child running makes the next child stop as soon as it starts.
        """
        self._drain_requested = self._drain_requested or drained
        child = self._child
        if child is not None:
            child.stop()
