"""Command hooks: ``sh -c <command>`` with the event context JSON on stdin.

The hook runs in the project directory (next to rocky.toml) with the process environment plus its own
``env`` table and ``ROCKY_EVENT`` / ``ROCKY_RUN_ID`` / ``ROCKY_PIPELINE``. Its stdout and stderr are
captured, never written to Rocky's stdout (which carries the result document): each line is logged at
debug level, and the last stderr line is quoted when the hook fails.

A hook is a child of the run, started through the launcher (``rocky_engine.process``): a hook that
outlives ``timeout_ms`` is stopped with everything it started (SIGTERM, SIGKILL ``KILL_GRACE_SECS``
later), so a stuck ``curl`` cannot hold the run; so is a hook still running when the run is interrupted
(SIGTERM/SIGINT, a drain, ``timeout_minutes``), and one whose ``rocky`` dies, even by ``kill -9``.
Processes a hook leaves behind when it exits are stopped too.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rocky_engine.config.hooks import CommandHook
from rocky_engine.hooks.event import HookEvent
from rocky_engine.logs import get_logger
from rocky_engine.redact import known

log = get_logger("hooks")

_TAIL_CHARS = 300
#: Seconds between SIGTERM and SIGKILL when a hook is stopped.
KILL_GRACE_SECS = 2.0


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
    #: stopped because the run was interrupted (SIGTERM/SIGINT, a drain, timeout_minutes)
    interrupted: bool = False

    def describe(self) -> str:
        """Why the hook failed, in a few words (empty when it succeeded)."""
        if self.ok:
            return ""
        if self.spawn_error:
            return f"could not start: {self.spawn_error}"
        if self.timed_out:
            return f"timed out after {self.duration_ms} ms and was killed"
        if self.interrupted:
            return "was stopped: the run was interrupted"
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
    from rocky_engine.process import Launch, start

    env = dict(os.environ if environ is None else environ)
    env.update(hook.env)
    env.update({"ROCKY_EVENT": event.event, "ROCKY_RUN_ID": event.run_id, "ROCKY_PIPELINE": event.pipeline})
    output = _Output(event.event, program_name(hook.command))
    t0 = time.perf_counter()
    try:
        child = start(Launch(
            argv=["sh", "-c", hook.command], cwd=cwd, env=env,
            stdin=(event.to_json() + "\n").encode("utf-8"),
            stdout=output.stdout, stderr=output.stderr,
            timeout=hook.timeout_ms / 1000, grace=KILL_GRACE_SECS,
        ))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return CommandOutcome(
            ok=False, exit_code=None, timed_out=False, duration_ms=_ms(t0), spawn_error=reason
        )
    done = child.wait()
    interrupted = done.stopped and not done.timed_out
    return CommandOutcome(
        ok=not done.timed_out and not interrupted and done.returncode == 0,
        exit_code=None if done.timed_out else done.returncode,
        timed_out=done.timed_out,
        duration_ms=_ms(t0),
        stderr_tail=output.tail,
        interrupted=interrupted,
    )


class _Output:
    """Logs each line of the hook's output at debug level and keeps the last non-empty stderr line."""

    def __init__(self, event: str, name: str) -> None:
        self._event = event
        self._name = name
        self.tail = ""

    def stdout(self, line: bytes) -> None:
        self._log("stdout", line)

    def stderr(self, line: bytes) -> None:
        # The excerpt is quoted in run stderr, `hooks test` JSON and the server log: redacted here, once.
        text = known()(self._log("stderr", line)).strip()
        if text:
            self.tail = text if len(text) <= _TAIL_CHARS else text[: _TAIL_CHARS - 3] + "..."

    def _log(self, label: str, line: bytes) -> str:
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if text:
            log.debug("hook on_%s (%s) %s: %s", self._event, self._name, label, text)
        return text


def _ms(t0: float) -> int:
    return int((time.perf_counter() - t0) * 1000)
