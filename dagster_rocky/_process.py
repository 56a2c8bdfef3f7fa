"""Run one engine command as a child process: own process group, one reader per pipe, a watchdog.

The engine may start children of its own (hooks, connectors), so a timeout kills the whole process group,
not just the direct child: SIGTERM first (the engine records an interrupted run), SIGKILL after a grace
period. stderr lines are yielded (``stream_cli``) or handed to a callback (``run_cli``) on the calling thread
as they are read (Dagster's step logger is not meant to be driven from foreign threads, and a multi-asset
yields its events from its own thread); stdout is collected whole for the JSON document.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

#: seconds between SIGTERM and SIGKILL when the watchdog fires
KILL_GRACE_SECONDS = 5.0
#: how long the readers may keep draining after the child exited (a grandchild can hold a pipe open)
_READER_JOIN_SECONDS = 5.0
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class CliOutcome:
    """What one engine invocation produced."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    duration_seconds: float
    timed_out: bool = False


def _read_all(pipe: IO[bytes], sink: list[bytes]) -> None:
    try:
        while chunk := pipe.read(65536):
            sink.append(chunk)
    except (OSError, ValueError):
        pass  # the pipe was closed under us after a kill; what was read is kept


def _read_lines(pipe: IO[bytes], sink: list[bytes], lines: queue.Queue[str | None]) -> None:
    try:
        for raw in iter(pipe.readline, b""):
            sink.append(raw)
            lines.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_cli(
    args: Sequence[str],
    *,
    timeout_seconds: float | None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    kill_grace_seconds: float | None = None,
) -> CliOutcome:
    """Run ``args`` to completion (or until the watchdog kills its process group).

    Raises:
        FileNotFoundError / PermissionError: the binary cannot be started (the caller words the error).
    """
    lines = stream_cli(
        args, timeout_seconds=timeout_seconds, env=env, cwd=cwd, kill_grace_seconds=kill_grace_seconds
    )
    while True:
        try:
            line = next(lines)
        except StopIteration as done:
            outcome: CliOutcome = done.value
            return outcome
        if on_stderr_line is not None:
            try:
                on_stderr_line(line)
            except Exception:  # a logging problem must never break the run it reports on
                pass


def stream_cli(
    args: Sequence[str],
    *,
    timeout_seconds: float | None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    kill_grace_seconds: float | None = None,
) -> Generator[str, None, CliOutcome]:
    """Run ``args``, yielding each stderr line the moment it is read; the generator returns the outcome.

    Lines are yielded on the caller's thread. A consumer that stops iterating early (``close()``, an
    exception in the step) terminates the child's process group, so no engine outlives its step.

    Raises:
        FileNotFoundError / PermissionError: the binary cannot be started (the caller words the error).
    """
    grace = KILL_GRACE_SECONDS if kill_grace_seconds is None else kill_grace_seconds
    started = time.monotonic()
    proc = subprocess.Popen(
        list(args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,  # its own process group, so the watchdog can kill grandchildren too
    )
    assert proc.stdout is not None and proc.stderr is not None
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    lines: queue.Queue[str | None] = queue.Queue()
    readers = [
        threading.Thread(target=_read_all, args=(proc.stdout, out_chunks), daemon=True),
        threading.Thread(target=_read_lines, args=(proc.stderr, err_chunks, lines), daemon=True),
    ]
    for reader in readers:
        reader.start()

    deadline = None if timeout_seconds is None else started + timeout_seconds
    timed_out = False
    killed_at: float | None = None
    stderr_open = True
    finished = False
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if deadline is not None and not timed_out and now >= deadline:
                timed_out = True
                killed_at = now
                _signal_group(proc.pid, signal.SIGTERM)
            elif timed_out and killed_at is not None and now - killed_at >= grace:
                _signal_group(proc.pid, signal.SIGKILL)
                killed_at = None  # SIGKILL sent once; now just wait for the exit
            if not stderr_open:
                try:
                    proc.wait(timeout=_POLL_SECONDS)
                except subprocess.TimeoutExpired:
                    pass
                continue
            # Block on the next line (not on the process): a line is handed on as soon as it is read.
            try:
                line = lines.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue
            if line is None:
                stderr_open = False
            else:
                yield line
        if timed_out:
            # The direct child is gone; make sure nothing it started outlives it.
            _signal_group(proc.pid, signal.SIGKILL)
        for reader in readers:
            reader.join(timeout=_READER_JOIN_SECONDS)
        while True:
            try:
                rest = lines.get_nowait()
            except queue.Empty:
                break
            if rest is not None:
                yield rest
        finished = True
    finally:
        if not finished and proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
    return CliOutcome(
        args=list(args),
        returncode=proc.returncode,
        stdout=b"".join(out_chunks).decode("utf-8", errors="replace"),
        stderr=b"".join(err_chunks).decode("utf-8", errors="replace"),
        duration_seconds=time.monotonic() - started,
        timed_out=timed_out,
    )


def preview(text: str, limit: int = 4000) -> str:
    """``text`` capped at ``limit`` characters: its head and its tail, with the cut marked."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut} characters cut] ...\n{text[-half:]}"
