"""Start one attempt of a connector program and watch it until it ends or must be stopped.

What the program gets (seeds/child-connectors.md "What the program sees", "Limits"):

- a cleared environment: ``PATH``, ``LANG`` (only when Rocky has it), the declared secrets,
  ``ROCKY_RUN_ID``, and ``HOME`` = ``TMPDIR`` = its scratch directory, which is also its working directory;
- its own process group (a new session) under the launcher's supervisor (``rocky_engine.process``), so a
  Ctrl-C on Rocky's terminal does not reach it, Rocky can stop the program together with every process it
  forked, and a ``kill -9`` of Rocky stops them too (and removes the attempt's scratch directory);
- ``RLIMIT_CPU`` (hard limit 5 s above the soft one), ``RLIMIT_AS`` (best effort: macOS often refuses
  it), ``RLIMIT_FSIZE`` = ``output_bytes``;
- the request as one JSON document on stdin.

Rocky stops the program's processes (SIGTERM, then SIGKILL 5 s later) when the wall time runs out, when
the files in the scratch directory (summed every 2 s) pass ``output_bytes``, when Rocky itself is
interrupted, and when the program exits but leaves processes behind. Every line the program prints goes
to Rocky's log (stderr), never to stdout, redacted by the one redactor (rocky_engine/redact.py): each
declared secret, and every other secret of the project, whole and line by line, replaced by ``${NAME}``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rocky_engine.connectors.limits import CPU_HARD_MARGIN_SECS, EffectiveLimits
from rocky_engine.connectors.scratch import directory_bytes
from rocky_engine.logs import get_logger
from rocky_engine.process import Rlimit
from rocky_engine.redact import Redactor

log = get_logger("connector")

#: Seconds between SIGTERM and SIGKILL.
KILL_GRACE_SECS = 5.0
#: Seconds between two sums of the scratch directory's file sizes.
SIZE_CHECK_SECS = 2.0
#: Longest program output line passed to the log in one piece.
MAX_LINE_BYTES = 64 * 1024
_POLL_SECS = 0.05


def program_env(
    parent: Mapping[str, str], secrets: Mapping[str, str], run_id: str, scratch: Path
) -> dict[str, str]:
    """The whole environment of the program: nothing of Rocky's is handed over beyond this."""
    env = {"PATH": parent.get("PATH", os.defpath)}
    if "LANG" in parent:
        env["LANG"] = parent["LANG"]
    env.update(secrets)
    env["ROCKY_RUN_ID"] = run_id
    env["HOME"] = str(scratch)
    env["TMPDIR"] = str(scratch)
    return env


@dataclass(frozen=True)
class LaunchSpec:
    """Everything one attempt needs."""

    argv: list[str]
    scratch: Path
    env: dict[str, str]
    request: bytes
    limits: EffectiveLimits
    redact: Redactor
    #: names the log lines (``connector NAME``)
    label: str


@dataclass(frozen=True)
class LaunchOutcome:
    """How the attempt's program ended."""

    returncode: int | None
    #: why Rocky stopped it: ``wall_time``, ``output_bytes``, ``interrupted``; None when it ended itself
    stopped: str | None
    duration_secs: float
    #: the program could not be started at all
    start_error: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.start_error is None and self.stopped is None and self.returncode == 0

    def describe(self, limits: EffectiveLimits) -> str:
        """Why the attempt failed, in words."""
        if self.start_error is not None:
            return f"the program could not be started: {self.start_error}"
        if self.stopped == "wall_time":
            return f"the program ran past its wall time of {limits.wall_time_secs} s and was stopped"
        if self.stopped == "output_bytes":
            return f"the program wrote more than output_bytes ({limits.output_bytes} bytes) and was stopped"
        if self.stopped == "interrupted":
            return "rocky was interrupted; the program was stopped"
        code = self.returncode
        if code is not None and code < 0:
            name = _signal_name(-code)
            if -code == signal.SIGXFSZ:
                return f"the program was killed by {name}: a file passed output_bytes ({limits.output_bytes})"
            if -code == signal.SIGXCPU:
                return f"the program was killed by {name}: it used its cpu_time_secs ({limits.cpu_time_secs})"
            return f"the program was killed by {name}"
        return f"the program exited with code {code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _rlimits(limits: EffectiveLimits) -> tuple[Rlimit, ...]:
    found: list[Rlimit] = []
    if limits.cpu_time_secs is not None:
        cpu = limits.cpu_time_secs
        found.append(Rlimit("RLIMIT_CPU", cpu, cpu + CPU_HARD_MARGIN_SECS))
    if limits.memory_bytes is not None:
        # macOS often refuses RLIMIT_AS; the program then runs without it (seed, "Limits").
        found.append(Rlimit("RLIMIT_AS", limits.memory_bytes, limits.memory_bytes, best_effort=True))
    found.append(Rlimit("RLIMIT_FSIZE", limits.output_bytes, limits.output_bytes))
    return tuple(found)


def run_program(spec: LaunchSpec, stop: threading.Event) -> LaunchOutcome:
    """Run the program of one attempt to its end; ``stop`` set by another thread stops it early."""
    from rocky_engine.process import Launch, start

    t0 = time.monotonic()
    out, err = _LineLogger(spec, "stdout"), _LineLogger(spec, "stderr")

    def wall_time() -> None:
        log.warning("connector %s: stopping the program (wall time)", spec.label)

    try:
        child = start(Launch(
            argv=spec.argv, cwd=spec.scratch, env=spec.env, stdin=spec.request, stdout=out, stderr=err,
            timeout=spec.limits.wall_time_secs, grace=KILL_GRACE_SECS, rlimits=_rlimits(spec.limits),
            remove_on_orphan=spec.scratch, max_line_bytes=MAX_LINE_BYTES, on_timeout=wall_time,
        ))
    except OSError as exc:
        return LaunchOutcome(None, None, time.monotonic() - t0, start_error=str(exc))
    reason: str | None = None
    next_size_check = t0 + SIZE_CHECK_SECS
    while (done := child.poll_for(_POLL_SECS)) is None:
        if reason is not None:
            continue
        if stop.is_set():
            reason = "interrupted"
        elif time.monotonic() >= next_size_check:
            next_size_check = time.monotonic() + SIZE_CHECK_SECS
            if directory_bytes(spec.scratch) > spec.limits.output_bytes:
                reason = "output_bytes"
        if reason is not None:
            log.warning("connector %s: stopping the program (%s)", spec.label, reason.replace("_", " "))
            child.stop()
    out.flush()
    err.flush()
    if done.timed_out:
        reason = "wall_time"
    elif reason is None and done.leftovers:
        log.warning("connector %s: the program exited but left processes running; they were stopped",
                    spec.label)
    if done.survivors:
        log.error("connector %s: %d process(es) of the program did not die after SIGKILL", spec.label,
                  done.survivors)
    return LaunchOutcome(done.returncode, reason, done.duration)


class _LineLogger:
    """Logs each line the program prints, redacted. A line longer than ``MAX_LINE_BYTES`` arrives in
    pieces; the tail of a piece that may hold the start of a secret goes with the next piece."""

    def __init__(self, spec: LaunchSpec, stream: str) -> None:
        self._spec = spec
        self._stream = stream
        self._fields = {"connector": spec.label, "stream": stream}
        self._carry = b""

    def __call__(self, piece: bytes) -> None:
        raw, self._carry = self._carry + piece, b""
        longest = self._spec.redact.longest
        if not raw.endswith(b"\n") and len(raw) >= MAX_LINE_BYTES and longest > 1:
            keep = longest - 1
            raw, self._carry = raw[:-keep], raw[-keep:]
        self._log(raw)

    def flush(self) -> None:
        if self._carry:
            raw, self._carry = self._carry, b""
            self._log(raw)

    def _log(self, raw: bytes) -> None:
        line = self._spec.redact(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        log.info("connector %s [%s] %s", self._spec.label, self._stream, line, extra={"fields": self._fields})
