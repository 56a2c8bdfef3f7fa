"""What is loaded is what was checked: a process outside the program's tree (on Linux the launcher stops
every process the program started, setsid or not, when it exits, so only such a process can still write
there) swaps a checked 3-row file for a 1000-row one after the checks, while rocky waits for the state
writer before the promote. The run fails before the promote naming the file; nothing is loaded, the state
does not move, and the next run loads the batch once."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rocky_engine.state.store import StateStore
from tests.engine.connectors.kit import ConnectorProject
from tests.fixtures.processes import wait_for


def _lines(proc: subprocess.Popen[str], into: list[str]) -> threading.Thread:
    def read() -> None:
        assert proc.stderr is not None
        into.extend(proc.stderr)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def _swapper(tmp: Path, target: Path) -> subprocess.Popen[str]:
    """A process in a session of its own, outside rocky's tree: replaces ``target`` by ``tmp`` on "go"."""
    script = f"import os, sys; sys.stdin.readline(); os.replace({str(tmp)!r}, {str(target)!r}); print('done')"
    return subprocess.Popen(["python3", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)


def test_a_file_swapped_after_the_checks_fails_the_run_before_the_promote(cp: ConnectorProject) -> None:
    go = cp.root / "go"
    cp.setup("wait_then_ok", f"marker={cp.marker}", f"go={go}", extra="state_lock_wait_secs = 60")
    rocky = cp.popen()
    lines: list[str] = []
    reader = _lines(rocky, lines)
    wait_for(cp.marker.exists, what="the program to start (the batch is claimed)")
    [scratch] = cp.scratch_dirs()
    big = scratch / ".big.parquet"
    pq.write_table(pa.table({"id": pa.array(range(1000), pa.int64()), "name": ["x"] * 1000}), big)
    swapper = _swapper(big, scratch / "part-0.parquet")
    blocker = StateStore.open(cp.state_path, writer=True)  # rocky waits for it after the checks
    try:
        go.touch()
        wait_for(lambda: any("to promote the batch" in line for line in lines),
                 what="rocky to check the files and wait before the promote")
        out, _ = swapper.communicate("go\n", timeout=30)
        assert out.strip() == "done"
    finally:
        blocker.close()
    out = rocky.stdout.read() if rocky.stdout else ""
    rocky.wait(timeout=60)
    reader.join(timeout=5)
    assert rocky.returncode == 1, "".join(lines)
    doc = json.loads(out)
    error = doc["connector"]["error"]
    assert "'part-0.parquet' was replaced by another file after it was checked (before the promote)" in error
    assert doc["files_loaded"] == 0 and doc["total_rows"] == 0
    assert "events" not in cp.relations() or cp.count() == 0
    assert cp.state() is None and cp.claims()["connector:fake:0"]["state"] == "failed"  # freed

    again = cp.load()
    assert again.returncode == 0, again.stderr
    assert cp.rows("SELECT count(*), count(DISTINCT id) FROM wh.raw.events") == [(3, 3)]
    assert not os.path.exists(big)
