"""``--wait-for-lock SECONDS`` on ``rocky run`` and ``rocky load``: a bounded wait for the state writer lock
held by a real second process, one log line naming the holder, then the usual lock error.

The holder is a real process that opens the store as its writer, prints ``ready`` and keeps the lock until
the test writes a line to its stdin. The waiting ``rocky run`` is released only after the test has read
its "locked by pid N" line: the handshake, never a sleep.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.run.conftest import WarehouseProject
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import ROCKY, child_env

HOLDER = """
import sys
from pathlib import Path
from rocky_engine.state.store import StateStore

store = StateStore.open(Path(sys.argv[1]), writer=True)
print("ready", flush=True)
sys.stdin.readline()
store.close()
"""


@pytest.fixture
def holder(wp: WarehouseProject) -> Iterator[subprocess.Popen[str]]:
    wp.model("a", "SELECT 1 AS id")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(wp.state_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=wp.root, env=child_env())
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0


def test_run_waits_for_the_holder_then_runs(wp: WarehouseProject, holder: subprocess.Popen[str]) -> None:
    run = subprocess.Popen(
        [*ROCKY, "-c", str(wp.config), "run", "--wait-for-lock", "120", "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=wp.root, env=child_env())
    try:
        line = _stderr_line_with(run, "is locked by")
        doc = json.loads(line)
        assert doc["level"] == "warning"
        assert f"is locked by pid {holder.pid} on " in doc["message"]
        assert "waiting up to 120 s for it" in doc["message"]
        assert run.poll() is None  # still waiting: the holder has not let go
        release(holder)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, stderr.decode()[-2000:]
    assert json.loads(stdout)["status"] == "Success"
    assert stderr.decode().count("is locked by") == 0  # the one line was the one already read


def test_a_bounded_wait_ends_in_the_usual_lock_error(wp: WarehouseProject,
                                                     holder: subprocess.Popen[str]) -> None:
    result = rocky_in_process(["-c", str(wp.config), "run", "--wait-for-lock", "0.2"])
    assert result.returncode == 1 and result.stdout == ""
    [error] = result.error_lines
    assert error.startswith(
        f"error: state store at {wp.state_path} is locked by another process; only one rocky writer can "
        f"run at a time against the same state file; it was still held by pid {holder.pid} on ")
    assert error.endswith("after 0.2 s of waiting")
    assert result.stderr.count("is locked by pid") == 1  # the wait's one log line
    at_once = rocky_in_process(["-c", str(wp.config), "run"])  # no flag: fails at once, as before
    assert at_once.returncode == 1 and "still held" not in at_once.stderr
    assert "is locked by another process" in at_once.stderr
    bad = rocky_in_process(["-c", str(wp.config), "run", "--wait-for-lock", "-1"])
    assert bad.error_lines == ["error: --wait-for-lock must be a number of seconds, 0 or more"]


def test_load_waits_for_the_lock_too(tmp_path: Path) -> None:
    project = WarehouseProject(tmp_path)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "x.csv").write_text("id\n1\n")
    project.write_config(
        '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n\n[pipeline.files]\ntype = "load"\n'
        'source_dir = "files"\n\n[pipeline.files.target]\ncatalog = "wh"\nschema = "raw"\n')
    state = tmp_path / ".rocky-state.db"
    located = rocky_in_process(["-c", str(project.config), "--state-path", str(state), "load"])
    assert located.returncode == 0, located.stderr
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(state)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=tmp_path, env=child_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        result = rocky_in_process(["-c", str(project.config), "--state-path", str(state), "load",
                                   "--wait-for-lock", "0.2"])
        assert result.returncode == 1
        assert f"still held by pid {proc.pid} on " in result.error_lines[0]
    finally:
        release(proc)


def _stderr_line_with(proc: subprocess.Popen[bytes], text: str) -> str:
    """The first stderr line containing ``text`` (read as it arrives; a deadline, no sleep)."""
    assert proc.stderr is not None
    fd, buffer, end = proc.stderr.fileno(), b"", time.monotonic() + 60
    while True:
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            if text in raw.decode():
                return raw.decode()
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            raise AssertionError(f"no stderr line with {text!r}; got {buffer.decode()!r}")
        buffer += chunk
