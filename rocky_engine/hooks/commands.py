"""Command hooks: ``sh -c <command>`` with the event context JSON on stdin.

The hook runs in the project directory (next to rocky.toml) with the process environment plus its own
``env`` table and ``ROCKY_EVENT`` / ``ROCKY_RUN_ID`` / ``ROCKY_PIPELINE``. Its stdout and stderr are
captured, never written to Rocky's stdout (which carries the result document): they are logged at debug
level, and the last stderr line is quoted when the hook fails. A hook that outlives ``timeout_ms`` is killed
with its whole process group, so a stuck ``curl`` cannot hold the run.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rocky_engine.config.hooks import CommandHook
from rocky_engine.hooks.event import HookEvent
from rocky_engine.logs import get_logger

log = get_logger("hooks")

_TAIL_CHARS = 300


@dataclass(frozen=True)
class CommandOutcome:
    """What one command hook did."""

    ok: bool
    exit_code: int | None
    timed_out: bool
    duration_ms: int
    #: the last non-empty line of stderr (trimmed), to say why a hook failed
    stderr_tail: str = ""
    #: set when the command could not be started at all
    spawn_error: str | None = None

    def describe(self) -> str:
        """Why the hook failed, in a few words (empty when it succeeded)."""
        if self.ok:
            return ""
        if self.spawn_error:
            return f"could not start: {self.spawn_error}"
        if self.timed_out:
            return f"timed out after {self.duration_ms} ms and was killed"
        tail = f": {self.stderr_tail}" if self.stderr_tail else ""
        return f"exited with code {self.exit_code}{tail}"


def program_name(command: str) -> str:
    """The program a command line starts (its first word, basename only): safe to name in a log line,
    unlike the whole line, which may carry substituted secrets."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return os.path.basename(words[0]) if words else "(empty)"


def run_command_hook(
    hook: CommandHook,
    event: HookEvent,
    *,
    cwd: Path,
    environ: Mapping[str, str] | None = None,
) -> CommandOutcome:
    """Run ``hook`` for ``event`` and wait for it (at most ``timeout_ms``)."""
    env = dict(os.environ if environ is None else environ)
    env.update(hook.env)
    env.update({"ROCKY_EVENT": event.event, "ROCKY_RUN_ID": event.run_id, "ROCKY_PIPELINE": event.pipeline})
    stdin = (event.to_json() + "\n").encode("utf-8")
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            ["sh", "-c", hook.command],
            cwd=str(cwd),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # Own process group: a timeout kills the shell and everything it started.
            start_new_session=True,
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return CommandOutcome(
            ok=False, exit_code=None, timed_out=False, duration_ms=_ms(t0), spawn_error=reason
        )
    timed_out = False
    try:
        out, err = proc.communicate(input=stdin, timeout=hook.timeout_ms / 1000)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    duration = _ms(t0)
    _log_output(event.event, hook.command, out, err)
    code = proc.returncode
    return CommandOutcome(
        ok=not timed_out and code == 0,
        exit_code=None if timed_out else code,
        timed_out=timed_out,
        duration_ms=duration,
        stderr_tail=_tail(err),
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _tail(err: bytes) -> str:
    lines = [line.strip() for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return last if len(last) <= _TAIL_CHARS else last[: _TAIL_CHARS - 3] + "..."


def _log_output(event: str, command: str, out: bytes, err: bytes) -> None:
    name = program_name(command)
    for label, data in (("stdout", out), ("stderr", err)):
        text = data.decode("utf-8", "replace").rstrip()
        if text:
            log.debug("hook on_%s (%s) %s: %s", event, name, label, text)


def _ms(t0: float) -> int:
    return int((time.perf_counter() - t0) * 1000)
