"""Start one attempt of a connector program and watch it until it ends or must be stopped.

What the program gets (seeds/child-connectors.md "What the program sees", "Limits"):

- a cleared environment: ``PATH``, ``LANG`` (only when Rocky has it), the declared secrets,
  ``ROCKY_RUN_ID``, and ``HOME`` = ``TMPDIR`` = its scratch directory, which is also its working directory;
- its own process group (a new session), so a Ctrl-C on Rocky's terminal does not reach it and Rocky can
  stop the program together with every process it forked;
- ``RLIMIT_CPU`` (hard limit 5 s above the soft one), ``RLIMIT_AS`` (best effort: macOS often refuses
  it), ``RLIMIT_FSIZE`` = ``output_bytes``; on Linux also ``PR_SET_PDEATHSIG`` so a ``kill -9`` of Rocky
  does not leave the program running;
- the request as one JSON document on stdin.

Rocky stops the group (SIGTERM, then SIGKILL 5 s later) when the wall time runs out, when the files in the
scratch directory (summed every 2 s) pass ``output_bytes``, when Rocky itself is interrupted, and when the
program exits but leaves processes of its group behind. Every line the program prints goes to Rocky's log
(stderr), never to stdout, with each declared secret value of at least 8 bytes replaced by ``${NAME}``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rocky_engine.connectors.limits import CPU_HARD_MARGIN_SECS, EffectiveLimits
from rocky_engine.connectors.scratch import directory_bytes
from rocky_engine.logs import get_logger

log = get_logger("connector")

#: Secret values shorter than this are not redacted (a known gap: they would match too much text).
MIN_REDACT_BYTES = 8
#: Seconds between SIGTERM and SIGKILL.
KILL_GRACE_SECS = 5.0
#: Seconds between two sums of the scratch directory's file sizes.
SIZE_CHECK_SECS = 2.0
#: Longest program output line passed to the log in one piece.
MAX_LINE_BYTES = 64 * 1024
_POLL_SECS = 0.05


class Redactor:
    """Replaces declared secret values (>= 8 bytes) by ``${NAME}``, longest value first."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        pairs = [(v, n) for n, v in secrets.items() if len(v.encode("utf-8")) >= MIN_REDACT_BYTES]
        self._pairs = sorted(pairs, key=lambda p: len(p[0]), reverse=True)
        #: bytes of the longest redacted value (a cut line keeps this much minus one for the next piece)
        self.longest = max((len(v.encode("utf-8")) for v, _ in pairs), default=0)

    def __call__(self, text: str) -> str:
        for value, name in self._pairs:
            if value in text:
                text = text.replace(value, "${" + name + "}")
        return text


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


def _preexec(limits: EffectiveLimits, pdeathsig: Callable[[], None] | None) -> Callable[[], None]:
    import resource

    def _set(which: int, soft: int, hard: int, *, best_effort: bool) -> None:
        _cur_soft, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            hard, soft = min(hard, cur_hard), min(soft, cur_hard)
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            if not best_effort:
                raise

    def run() -> None:
        if pdeathsig is not None:
            pdeathsig()
        if limits.cpu_time_secs is not None:
            cpu = limits.cpu_time_secs
            _set(resource.RLIMIT_CPU, cpu, cpu + CPU_HARD_MARGIN_SECS, best_effort=False)
        if limits.memory_bytes is not None:
            # macOS often refuses RLIMIT_AS; the program then runs without it (seed, "Limits").
            _set(resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes, best_effort=True)
        _set(resource.RLIMIT_FSIZE, limits.output_bytes, limits.output_bytes, best_effort=False)

    return run


def _pdeathsig() -> Callable[[], None] | None:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)`` for the child (Linux, main thread only: the signal fires when
    the forking *thread* ends)."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def run() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    return run


def run_program(spec: LaunchSpec, stop: threading.Event) -> LaunchOutcome:
    """Run the program of one attempt to its end; ``stop`` set by another thread stops it early."""
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            spec.argv,
            cwd=spec.scratch,
            env=spec.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            # preexec_fn: the rlimits must be set in the child, before exec
            preexec_fn=_preexec(spec.limits, _pdeathsig()),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return LaunchOutcome(None, None, time.monotonic() - t0, start_error=str(exc))
    pgid = proc.pid  # start_new_session: the program leads its own group
    threads = [
        _thread(_feed, proc.stdin, spec.request),
        _thread(_pump, proc.stdout, spec, "stdout"),
        _thread(_pump, proc.stderr, spec, "stderr"),
    ]
    stopped = _watch(proc, pgid, spec, stop, t0)
    if stopped is None and _group_alive(pgid):
        log.warning("connector %s: the program exited but left processes of its group running; stopping "
                    "them", spec.label)
        _stop_group(proc, pgid)
    for t in threads:
        t.join(timeout=2.0)
    return LaunchOutcome(proc.returncode, stopped, time.monotonic() - t0)


def _watch(
    proc: subprocess.Popen[bytes], pgid: int, spec: LaunchSpec, stop: threading.Event, t0: float
) -> str | None:
    deadline = t0 + spec.limits.wall_time_secs
    next_size_check = t0 + SIZE_CHECK_SECS
    while True:
        try:
            proc.wait(timeout=_POLL_SECS)
            return None
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        reason: str | None = None
        if stop.is_set():
            reason = "interrupted"
        elif now >= deadline:
            reason = "wall_time"
        elif now >= next_size_check:
            next_size_check = now + SIZE_CHECK_SECS
            if directory_bytes(spec.scratch) > spec.limits.output_bytes:
                reason = "output_bytes"
        if reason is not None:
            log.warning("connector %s: stopping the program (%s)", spec.label, reason.replace("_", " "))
            _stop_group(proc, pgid)
            return reason


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_group(proc: subprocess.Popen[bytes], pgid: int) -> None:
    """SIGTERM to the whole group; SIGKILL to whatever is left 5 s later."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_SECS
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid):
            return
        time.sleep(_POLL_SECS)
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=KILL_GRACE_SECS)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        log.error("the connector program (pid %d) did not die after SIGKILL", proc.pid)


def _thread(target: Callable[..., None], *args: object) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    if pipe is None:
        return
    try:
        pipe.write(data)
    except OSError:
        pass  # a program that does not read its request simply never sees it
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _pump(pipe: IO[bytes] | None, spec: LaunchSpec, stream: str) -> None:
    if pipe is None:
        return
    fields = {"connector": spec.label, "stream": stream}
    carry = b""
    try:
        while True:
            raw = pipe.readline(MAX_LINE_BYTES)
            if not raw:
                break
            raw, carry = carry + raw, b""
            if not raw.endswith(b"\n") and len(raw) >= MAX_LINE_BYTES and spec.redact.longest > 1:
                # A line cut in two pieces could cut a secret in two: the tail that may hold the start
                # of one goes with the next piece.
                keep = spec.redact.longest - 1
                raw, carry = raw[:-keep], raw[-keep:]
            _log_line(spec, stream, raw, fields)
        if carry:
            _log_line(spec, stream, carry, fields)
    except (OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _log_line(spec: LaunchSpec, stream: str, raw: bytes, fields: dict[str, str]) -> None:
    line = spec.redact(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
    log.info("connector %s [%s] %s", spec.label, stream, line, extra={"fields": fields})
