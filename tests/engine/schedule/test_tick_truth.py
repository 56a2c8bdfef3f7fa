"""Two small lies of ``rocky tick`` (issue 13 item 9), against real ``rocky tick`` processes.

- ``last_evaluated_at`` (what ``doctor --check scheduler`` reads) never moves backwards: a tick replayed
  with a ``--now`` in the past leaves the newer stamp.
- A tick skipped because another writer holds the state store (``state_busy``) says so on stderr in one
  line, not only in its JSON.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from pathlib import Path

import pytest

from rocky_engine.state.store import lock_path_of
from tests.engine.schedule.kit import rocky, tick_json, transformation, write_project

LATER = "2026-05-02T03:10:00Z"
EARLIER = "2026-05-01T00:00:00Z"


def _project(root: Path) -> Path:
    body = transformation("hourly", 'cron = "0 * * * *"')
    return write_project(root, body, {"good.sql": "select 1 as x\n"})


def _stamps(store: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT pipeline, last_evaluated_at FROM schedule_state").fetchall())
    finally:
        conn.close()


@pytest.mark.slow
def test_a_tick_in_the_past_never_moves_last_evaluated_at_backwards(tmp_path: Path) -> None:
    _project(tmp_path)
    store = tmp_path / "models" / ".rocky-state.db"
    code, _ = tick_json(tmp_path, "--now", LATER)
    assert code == 0
    later = _stamps(store)["hourly"]
    assert later.startswith("2026-05-02T03:10:00")

    code, doc = tick_json(tmp_path, "--now", EARLIER)
    assert code == 0 and doc["counts"]["evaluated"] == 1
    assert _stamps(store)["hourly"] == later

    # the doctor reads the newer stamp: twenty minutes before its --now, an hourly timer is alive (the
    # older stamp would be 27 hours old: a dead timer)
    doctor = rocky(
        tmp_path, "doctor", "--check", "scheduler", "--now", "2026-05-02T03:30:00Z", "--output", "json"
    )
    [check] = json.loads(doctor.stdout)["checks"]
    assert check["status"] == "healthy", check


def test_a_state_busy_skip_logs_one_line(tmp_path: Path) -> None:
    _project(tmp_path)
    store = tmp_path / "models" / ".rocky-state.db"
    fd = os.open(lock_path_of(store), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer, as a running `rocky run` is
        proc = rocky(tmp_path, "tick", "--output", "json")
    finally:
        os.close(fd)
    assert proc.returncode == 0, proc.stderr
    assert '"reason": "state_busy"' in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if "state_busy" in line]
    assert len(lines) == 1, proc.stderr
    assert str(store) in lines[0] and "locked by another process" in lines[0]
