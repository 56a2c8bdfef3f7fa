"""Run one scheduled child: ``rocky -c <config> --state-path <abs> run --pipeline P --output json``.

The child gets ``ROCKY_RUN_TRIGGER`` (schedule | webhook) and ``ROCKY_SUBMISSION_ID`` so its run record
joins the tick that launched it, and runs in its own process group (a signal aimed at the reconciler does
not reach it, and ``killpg`` reaches its own children). ``timeout_seconds`` sends SIGTERM to the group, and
SIGKILL ``kill_grace_seconds`` (60 s; injectable for tests) later. :meth:`SubprocessSpawner.terminate`
does the same from another thread or a signal handler for a shutdown drain; such a child is reported
``drained`` (no incident bundle).

The reconciler depends only on the :class:`Spawner` protocol, so the server and tests inject their own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, Protocol

from rocky_engine.logs import get_logger

KILL_GRACE_SECONDS = 60.0
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
        "run", "--pipeline", request.pipeline, "--output", "json",
        *request.extra_args,
    ]


def child_env(request: ChildRequest, base: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in _STRIPPED_ENV}
    env["ROCKY_RUN_TRIGGER"] = request.trigger
    env["ROCKY_SUBMISSION_ID"] = request.submission_id
    return env


class SubprocessSpawner:
    """The real spawner: one child process at a time, in its own process group."""

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        kill_grace_seconds: float = KILL_GRACE_SECONDS,
        env: Mapping[str, str] | None = None,
        poll_seconds: float = 0.25,
    ) -> None:
        #: the ``rocky`` entry point; the running interpreter by default, so the child is this engine
        default = [sys.executable, "-m", "rocky_engine.cli.main"]
        self.command = list(command) if command is not None else default
        self.kill_grace_seconds = kill_grace_seconds
        self._env = env
        self._poll = poll_seconds
        # Re-entrant: terminate() may run in a signal handler while the main thread holds it.
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._term_sent_at: float | None = None
        self._drain_requested = False

    def run(self, request: ChildRequest, on_start: Callable[[int], None] | None = None) -> ChildResult:
        argv = child_argv(request, self.command)
        env = child_env(request, os.environ if self._env is None else self._env)
        t0 = time.monotonic()
        try:
            with contextlib.ExitStack() as stack:
                stdout: int | IO[bytes] = subprocess.DEVNULL
                if request.stdout_path is not None:
                    stdout = stack.enter_context(open(request.stdout_path, "wb"))
                proc = subprocess.Popen(
                    argv, cwd=request.cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                    start_new_session=True,
                )
        except OSError as exc:
            log.error("could not start the scheduled run of %s: %s", request.pipeline, exc)
            return ChildResult(CANNOT_START, started=False)
        with self._lock:
            self._proc = proc
            self._term_sent_at = None
            drain_early = self._drain_requested
        if drain_early:
            self._signal(proc, signal.SIGTERM)
        if on_start is not None:
            on_start(proc.pid)
        timed_out = False
        deadline = t0 + request.timeout_seconds if request.timeout_seconds else None
        try:
            while True:
                try:
                    code = proc.wait(timeout=self._poll)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                with self._lock:
                    term_at = self._term_sent_at
                if term_at is None and deadline is not None and now >= deadline:
                    timed_out = True
                    log.error(
                        "scheduled run of %s exceeded timeout_minutes (%.0f s): sending SIGTERM, SIGKILL in "
                        "%.0f s", request.pipeline, request.timeout_seconds or 0, self.kill_grace_seconds,
                    )
                    self._signal(proc, signal.SIGTERM)
                elif term_at is not None and now - term_at >= self.kill_grace_seconds:
                    self._signal(proc, signal.SIGKILL)
        finally:
            with self._lock:
                terminated = self._term_sent_at is not None
                drained = self._drain_requested and terminated and not timed_out
                self._proc = None
            if terminated:
                # The group may outlive its leader (a connector the run started): take it down too.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        exit_code = code if code >= 0 else 128 - code
        return ChildResult(
            exit_code, timed_out=timed_out, drained=drained, pid=proc.pid,
            duration_ms=int((time.monotonic() - t0) * 1000),
        )

    def _signal(self, proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with self._lock:
            if sig == signal.SIGTERM:
                if self._term_sent_at is not None:
                    return
                self._term_sent_at = time.monotonic()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)

    def terminate(self, *, drained: bool = True) -> None:
        """Stop the running child: SIGTERM now, SIGKILL after the grace (safe from a signal handler).

        With ``drained`` (a shutdown), the result is flagged so no incident bundle is written. A call
        with no child running makes the next child stop as soon as it starts.
        """
        self._drain_requested = self._drain_requested or drained
        proc = self._proc
        if proc is not None:
            self._signal(proc, signal.SIGTERM)
