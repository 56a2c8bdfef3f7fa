"""After a tick lock override, doctor names the wedged holder (audit finding 2), with real processes.

A real process takes ``.rocky/tick.lock`` and stops beating (its heartbeat is 400 s old); real
``rocky tick`` processes override it (``lock_overridden``) and exit; ``rocky doctor --check scheduler``
must still name the wedged process (pid, host) with the age of its own last heartbeat, never the exited
overriding tick's pid and never an age counted from the epoch (the released heartbeat's mtime 0).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocky_engine.wire.schedule import TickHeartbeat
from tests.engine.schedule.kit import rocky, tick_json, transformation, write_project

#: takes the lock, makes its own heartbeat 400 s stale, says so, and holds on until its stdin closes
WEDGED = """
import os, sys, time
from pathlib import Path
from rocky_engine.schedule.tick_lock import TickLock
lock = TickLock(Path(sys.argv[1]), heartbeat_interval=3600)
assert lock.acquire() == "acquired"
stale = time.time() - 400
os.utime(lock.heartbeat_path, (stale, stale))
print(os.getpid(), flush=True)
sys.stdin.read()
"""


def _doctor(root: Path) -> tuple[int, dict[str, object]]:
    proc = rocky(root, "doctor", "--check", "scheduler", "--output", "json")
    doc = json.loads(proc.stdout)
    [check] = doc["checks"]
    return proc.returncode, {"check": check, "suggestions": doc["suggestions"]}


@pytest.mark.slow
def test_doctor_names_the_wedged_holder_after_overrides(tmp_path: Path) -> None:
    write_project(tmp_path, transformation("hourly", 'cron = "0 * * * *"'), {"a.sql": "select 1 as x\n"})
    dot_rocky = tmp_path / ".rocky"
    started = time.time()
    holder = subprocess.Popen(
        [sys.executable, "-c", WEDGED, str(dot_rocky)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None
        wedged_pid = int(holder.stdout.readline())
        assert wedged_pid == holder.pid
        code, before = _doctor(tmp_path)
        assert code == 3 and f"pid {wedged_pid} on {socket.gethostname()}" in str(before["check"])

        tick_pids = []
        for _ in range(2):  # the second override must keep naming the same holder
            proc = rocky(tmp_path, "tick", "--output", "json")
            assert proc.returncode == 0, proc.stderr
            assert json.loads(proc.stdout)["lock_overridden"] is True
            assert f"held by pid {wedged_pid} on {socket.gethostname()}" in proc.stderr, proc.stderr
            # the overriding tick has exited; its released heartbeat names it as the writer only
            beat = TickHeartbeat.model_validate_json((dot_rocky / "tick.lock.heartbeat").read_bytes())
            assert beat.released and beat.wedged is not None and beat.wedged.pid == wedged_pid
            assert beat.pid is not None
            tick_pids.append(beat.pid)

            code, after = _doctor(tmp_path)
            check = after["check"]
            assert isinstance(check, dict)
            message = str(check["message"])
            assert code == 3 and check["status"] == "critical", check
            assert f"held by pid {wedged_pid} on {socket.gethostname()}" in message, message
            assert all(f"pid {p}" not in message + str(after["suggestions"]) for p in tick_pids), message
            # the age is the holder's own last heartbeat: 400 s plus the test's elapsed time
            match = re.search(r"last heartbeat (\d+) s ago", message)
            assert match is not None, message
            assert 400 <= int(match.group(1)) <= 400 + (time.time() - started) + 2, message
            assert "ticks override it since" in message
            [suggestion] = after["suggestions"]  # type: ignore[misc]
            assert f"pid {wedged_pid}" in suggestion and f"-p {wedged_pid}" in suggestion
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    # the holder is gone: the kernel freed the flock, the next tick takes it normally
    code, doc = tick_json(tmp_path)
    assert code == 0 and doc["lock_overridden"] is False
    assert os.path.exists(dot_rocky / "tick.lock")
    beat = TickHeartbeat.model_validate_json((dot_rocky / "tick.lock.heartbeat").read_bytes())
    assert beat.wedged is None
