"""The child spawner with real processes: argv and env, exit codes, timeout (SIGTERM then SIGKILL), drain.

Each child says when it is ready (a file, written after it installed its SIGTERM handler), and the timeout
fires through the injected clock only after that, so nothing depends on how fast the machine is.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from rocky_engine.schedule.spawner import CANNOT_START, ChildRequest, SubprocessSpawner
from tests.engine.process.kit import dead, sleeping_hook, until, wait_for_file, wait_for_hook
from tests.engine.schedule.kit import transformation, write_project
from tests.fixtures.projects import child_env

ECHO = """
import json, os, sys
out = sys.argv[1]
env = os.environ
json.dump({"argv": sys.argv[2:], "trigger": env.get("ROCKY_RUN_TRIGGER"),
           "submission": env.get("ROCKY_SUBMISSION_ID"), "key": env.get("ROCKY_IDEMPOTENCY_KEY"),
           "pgid": os.getpgid(0), "pid": os.getpid()}, open(out, "w"))
sys.exit(int(os.environ.get("EXIT", "0")))
"""

STUBBORN = """
import os, signal, subprocess, sys, time
log = sys.argv[1]
signal.signal(signal.SIGTERM, lambda *a: open(log, "a").write("term\\n"))
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(log, "a").write(f"grandchild {grandchild.pid}\\n")
open(log + ".ready", "w").write("ready")
while True:
    time.sleep(0.05)
"""

#: Exits 130 by itself on SIGTERM. The signal is blocked before "ready" and taken with ``sigtimedwait``,
#: not caught by a handler that raises: CPython runs a pending handler wherever it next checks, e.g.
#: inside the close of the temporary ready file below, called by its finalizer, which discards the
#: handler's ``SystemExit`` (a drain's SIGTERM landing there was lost: the child slept its 60 s and
#: exited 0); and a signal caught just before ``time.sleep`` enters its syscall does not cut it short.
#: A blocked SIGTERM stays pending until it is taken, wherever it landed.
POLITE = """
import signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
open(sys.argv[1] + ".ready", "w").write("ready")
sys.exit(130 if signal.sigtimedwait({signal.SIGTERM}, 60) else 0)
"""


def request(tmp_path: Path, timeout: float | None = None, trigger: str = "schedule") -> ChildRequest:
    return ChildRequest(
        pipeline="orders",
        config_path=tmp_path / "rocky.toml",
        state_path=tmp_path / "state.db",
        trigger=trigger,  # type: ignore[arg-type]
        submission_id="feed" * 8,
        timeout_seconds=timeout,
        cwd=tmp_path,
    )


def script(tmp_path: Path, text: str, out: Path) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text(text)
    return [sys.executable, str(path), str(out)]


def after(flag: Path, jump: float = 10_000.0) -> float:
    """A monotonic clock that jumps ``jump`` seconds ahead once ``flag`` exists (the child's handshake)."""
    return time.monotonic() + (jump if flag.exists() else 0.0)


def test_child_gets_argv_env_and_its_own_process_group(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    env = {**os.environ, "ROCKY_IDEMPOTENCY_KEY": "leak", "EXIT": "2"}
    pids: list[int] = []
    spawner = SubprocessSpawner(command=script(tmp_path, ECHO, out), env=env)
    result = spawner.run(request(tmp_path, trigger="webhook"), pids.append)
    seen = json.loads(out.read_text())
    assert result.exit_code == 2 and not result.timed_out and result.pid == pids[0] == seen["pid"]
    assert seen["argv"] == [
        "-c",
        str(tmp_path / "rocky.toml"),
        "--state-path",
        str(tmp_path / "state.db"),
        "run",
        "--pipeline",
        "orders",
        "--output",
        "json",
    ]
    assert (seen["trigger"], seen["submission"], seen["key"]) == ("webhook", "feed" * 8, None)
    assert seen["pgid"] == seen["pid"] != os.getpgid(0)


def test_cannot_start_is_exit_127(tmp_path: Path) -> None:
    result = SubprocessSpawner(command=[str(tmp_path / "missing-binary")]).run(request(tmp_path))
    assert (result.exit_code, result.started) == (CANNOT_START, False)


@pytest.mark.slow
def test_timeout_sends_sigterm_then_sigkill_to_the_group(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    ready = Path(f"{log}.ready")
    spawner = SubprocessSpawner(
        command=script(tmp_path, STUBBORN, log), kill_grace_seconds=0.5, clock=lambda: after(ready)
    )
    result = spawner.run(request(tmp_path, timeout=100))
    assert result.timed_out and not result.drained
    assert result.exit_code == 128 + 9  # the SIGTERM was ignored: SIGKILL after the grace
    assert result.duration_ms >= (10_000 + 0.5) * 1000  # and not before the grace
    lines = log.read_text().splitlines()
    assert "term" in lines
    grandchild = int(next(line for line in lines if line.startswith("grandchild")).split()[1])
    # the run returned only once the whole group was gone
    assert dead(grandchild)


def test_a_polite_child_stops_on_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "x"
    spawner = SubprocessSpawner(
        command=script(tmp_path, POLITE, marker), kill_grace_seconds=600,
        clock=lambda: after(Path(f"{marker}.ready")),
    )
    result = spawner.run(request(tmp_path, timeout=100))
    # exit 130 is the child's own SIGTERM handler: no SIGKILL was needed (the grace is 10 minutes)
    assert result.timed_out and result.exit_code == 130


def test_drain_terminates_and_flags_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "x"
    spawner = SubprocessSpawner(command=script(tmp_path, POLITE, marker), kill_grace_seconds=600)

    def drain() -> None:
        wait_for_file(Path(f"{marker}.ready"))
        spawner.terminate()

    timer = threading.Thread(target=drain)
    timer.start()
    result = spawner.run(request(tmp_path))
    timer.join()
    assert result.drained and not result.timed_out and result.exit_code == 130


def in_ready_write(pid: int, fifo: Path) -> bool:
    """``pid`` is blocked in the write(2) of its 5-byte "ready" to ``fifo`` (``/proc/<pid>/syscall``:
    number, fd, buffer, count: no syscall numbers, so any Linux architecture)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
        return len(fields) > 3 and fields[3] == "0x5" and (
            os.readlink(f"/proc/{pid}/fd/{int(fields[1], 16)}") == str(fifo)
        )
    except (OSError, ValueError):
        return False


def proc_status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def sigterm_landed(pid: int, switches: str) -> bool:
    """A SIGTERM is pending in ``pid`` (blocked), or ``pid`` woke since it had ``switches`` voluntary context
    switches (a caught signal interrupts the blocked write, runs the handler, and the write blocks again)."""
    status = proc_status(pid)
    bit = 1 << (signal.SIGTERM - 1)
    pending = any(int(status.get(key, "0"), 16) & bit for key in ("SigPnd", "ShdPnd"))
    return pending or status.get("voluntary_ctxt_switches", switches) != switches


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs /proc/<pid>/syscall (Linux)")
def test_a_drain_landing_while_the_child_writes_its_ready_file_still_stops_it(tmp_path: Path) -> None:
    """The CI failure (exit 0 after the child's full 60 s, drained=True): the drain's SIGTERM arrived while
    the child was still closing its ready file, from that temporary file object's finalizer. CPython runs
    pending signal handlers inside that close and discards what they raise, so a handler's
    ``sys.exit(130)`` vanished there. The ready file is a full FIFO here, so the child is held inside
    that write(2) until the SIGTERM has landed: it must still end by the drain, with its own 130."""
    marker = tmp_path / "x"
    fifo = Path(f"{marker}.ready")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    filler = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        while True:  # pages, then bytes: the pipe takes nothing more and the child's write blocks
            os.write(filler, b"." * 4096)
    except BlockingIOError:
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(filler, b".")
    os.close(filler)
    spawner = SubprocessSpawner(command=script(tmp_path, POLITE, marker), kill_grace_seconds=600)
    pids: queue.Queue[int] = queue.Queue()
    seen = bytearray()
    failures: list[str] = []

    def drain() -> None:
        try:
            pid = pids.get(timeout=60)
            deadline = time.monotonic() + 60
            if not until(lambda: in_ready_write(pid, fifo), deadline):
                failures.append("the child never blocked in its ready write")
            switches = proc_status(pid).get("voluntary_ctxt_switches", "")
            spawner.terminate()
            if not until(lambda: sigterm_landed(pid, switches), deadline):
                failures.append("the drain's SIGTERM never reached the child")
        finally:
            spawner.terminate()  # never leave the child blocked in its write: the run would not return
            os.set_blocking(reader, True)
            while data := os.read(reader, 65536):  # lets the write finish; EOF once the child closed it
                seen.extend(data)

    helper = threading.Thread(target=drain)
    helper.start()
    try:
        result = spawner.run(request(tmp_path), pids.put)
    finally:
        helper.join()
        os.close(reader)
    assert failures == []
    assert result.drained and not result.timed_out
    assert result.exit_code == 130 and result.duration_ms < 30_000
    assert seen.endswith(b"ready")  # it announced, and only then took the drain's SIGTERM


def test_a_drain_before_the_start_stops_the_next_child_at_once(tmp_path: Path) -> None:
    # the spawner appends rocky's arguments: they become the shell's positional parameters
    spawner = SubprocessSpawner(command=["sh", "-c", "sleep 600", "sh"], kill_grace_seconds=600)
    spawner.terminate()
    result = spawner.run(request(tmp_path))
    assert result.drained and result.exit_code == 128 + 15


@pytest.mark.slow
def test_timeout_minutes_stops_a_real_run_whose_hook_sleeps_in_about_the_grace(tmp_path: Path) -> None:
    """The run's SIGTERM stops its hook (the InterruptGuard stops every child), so the run ends on its own
    in seconds: not after the hook's 300 s, and not by the SIGKILL at the end of the 120 s grace."""
    pids = tmp_path / "pids"
    pids.mkdir()
    write_project(tmp_path, transformation("orders") + sleeping_hook(pids), {"good.sql": "select 1 as x\n"})
    spawner = SubprocessSpawner(env=child_env(), kill_grace_seconds=120, clock=lambda: after(pids / "sleep"))
    result = spawner.run(request(tmp_path, timeout=3600))
    assert result.timed_out
    assert result.exit_code == 130  # rocky run recorded the interrupt and exited by itself
    assert result.duration_ms < (10_000 + 60) * 1000  # well inside the grace: nobody waited for the hook
    sh, sleep = wait_for_hook(pids, timeout=0)
    assert dead(sh) and dead(sleep)  # gone before the run returned
