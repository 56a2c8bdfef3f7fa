"""The child spawner with real processes: argv and env, exit codes, timeout (SIGTERM then SIGKILL), drain."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from rocky_engine.schedule.spawner import CANNOT_START, ChildRequest, SubprocessSpawner

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
signal.signal(signal.SIGTERM, lambda *a: open(sys.argv[1], "a").write("term\\n"))
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[1], "a").write(f"grandchild {grandchild.pid}\\n")
while True:
    time.sleep(0.05)
"""

POLITE = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(130))
time.sleep(60)
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
    spawner = SubprocessSpawner(
        command=script(tmp_path, STUBBORN, log), kill_grace_seconds=0.5, poll_seconds=0.05
    )
    t0 = time.monotonic()
    result = spawner.run(request(tmp_path, timeout=0.5))
    elapsed = time.monotonic() - t0
    assert result.timed_out and not result.drained
    assert result.exit_code == 128 + 9  # the SIGTERM was ignored: SIGKILL after the grace
    assert 0.9 < elapsed < 10
    lines = log.read_text().splitlines()
    assert "term" in lines
    grandchild = int(next(line for line in lines if line.startswith("grandchild")).split()[1])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        _reap(grandchild)
        time.sleep(0.05)
    else:
        pytest.fail("the grandchild outlived the group kill")


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def test_a_polite_child_stops_on_sigterm(tmp_path: Path) -> None:
    spawner = SubprocessSpawner(
        command=script(tmp_path, POLITE, tmp_path / "x"), kill_grace_seconds=30, poll_seconds=0.05
    )
    t0 = time.monotonic()
    result = spawner.run(request(tmp_path, timeout=0.3))
    assert result.timed_out and result.exit_code == 130 and time.monotonic() - t0 < 10


def test_drain_terminates_and_flags_the_child(tmp_path: Path) -> None:
    spawner = SubprocessSpawner(command=script(tmp_path, POLITE, tmp_path / "x"), poll_seconds=0.05)
    started = threading.Event()

    def drain() -> None:
        started.wait(10)
        time.sleep(0.2)
        spawner.terminate()

    timer = threading.Thread(target=drain)
    timer.start()
    result = spawner.run(request(tmp_path), lambda pid: started.set())
    timer.join()
    assert result.drained and not result.timed_out and result.exit_code == 130
