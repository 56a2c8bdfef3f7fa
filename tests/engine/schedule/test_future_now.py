"""A future ``--now`` never silently stops cron firing (audit finding 3), against real ``rocky`` processes.

- A real ``rocky tick --now`` later than the wall clock (beyond the 5 s skew) is refused with exit 1 and
  writes nothing: no tick lock, no cursor; ``--dry-run`` may still preview that instant.
- ``rocky doctor --check scheduler`` warns about a ``last_evaluated_at`` in the future (as a tick before
  this rule left it), with what to do, instead of calling the scheduler healthy.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.errors import UsageError
from rocky_engine.schedule.clock import FUTURE_SKEW_SECONDS
from rocky_engine.state._time import rfc3339
from rocky_engine.state.schedule import ScheduleRepo
from rocky_engine.state.store import StateStore
from tests.engine.schedule.kit import (
    Clock,
    SimChild,
    project_at,
    reconciler,
    rocky,
    tick_json,
    transformation,
    write_project,
)

MODELS = {"good.sql": "select 1 as x\n"}
HOURLY = transformation("hourly", 'cron = "0 * * * *"')


def _future(hours: float = 13) -> str:
    return rfc3339(datetime.now(UTC) + timedelta(hours=hours))


def test_a_real_tick_refuses_a_future_now_and_writes_nothing(tmp_path: Path) -> None:
    write_project(tmp_path, HOURLY, MODELS)
    future = _future(13.1)
    proc = rocky(tmp_path, "tick", "--now", future, "--output", "json")
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    expected = rf"error: --now {future} is 13 h [56] min later than the wall clock"
    assert re.search(expected, proc.stderr), proc.stderr
    assert "cron would not fire again until then" in proc.stderr and "--dry-run" in proc.stderr
    # refused before the lock and the store: nothing dated in the future was stored
    assert not (tmp_path / ".rocky" / "tick.lock").exists()
    assert not (tmp_path / "models" / ".rocky-state.db").exists()
    # a preview of the same instant is fine: it writes nothing
    code, doc = tick_json(tmp_path, "--dry-run", "--now", future)
    assert code == 0 and doc["dry_run"] is True and doc["now"] == future


def test_the_skew_is_small(tmp_path: Path) -> None:
    """Within the skew a live tick runs; beyond it the reconciler itself refuses (every entry point)."""
    project = project_at(tmp_path, HOURLY, MODELS)
    wall = datetime.now(UTC)
    inside = Clock(wall + timedelta(seconds=FUTURE_SKEW_SECONDS - 1))
    rec = reconciler(inside, SimChild(inside))
    rec.wall = wall.timestamp
    assert rec.tick(project).counts.evaluated == 1
    beyond = Clock(wall + timedelta(seconds=FUTURE_SKEW_SECONDS + 1))
    rec = reconciler(beyond, SimChild(beyond))
    rec.wall = wall.timestamp
    with pytest.raises(UsageError, match="later than the wall clock"):
        rec.tick(project)
    assert rec.tick(project, dry_run=True).dry_run  # a dry run may look ahead


def test_doctor_warns_about_a_last_evaluation_in_the_future(tmp_path: Path) -> None:
    write_project(tmp_path, HOURLY, MODELS)
    code, _ = tick_json(tmp_path)  # a real tick at the wall clock: healthy
    assert code == 0
    ok = rocky(tmp_path, "doctor", "--check", "scheduler", "--output", "json")
    [check] = json.loads(ok.stdout)["checks"]
    assert check["status"] == "healthy", check
    # what a tick at a future --now left before the refusal existed
    future = datetime.now(UTC) + timedelta(hours=13)
    with StateStore.open(tmp_path / "models" / ".rocky-state.db") as store:
        ScheduleRepo(store).touch_evaluated(["hourly"], future)
    proc = rocky(tmp_path, "doctor", "--check", "scheduler", "--output", "json")
    assert proc.returncode == 0, proc.stderr  # a Warning, not a Critical
    doc = json.loads(proc.stdout)
    [check] = doc["checks"]
    assert check["status"] == "warning", check
    assert f"the last tick evaluated at {rfc3339(future)}" in check["message"]
    assert "in the future" in check["message"] and "cron slots up to then do not fire" in check["message"]
    assert any("host clock" in s for s in doc["suggestions"])
    assert any("--dry-run" in s and rfc3339(future) in s for s in doc["suggestions"])
    conn = sqlite3.connect(f"file:{tmp_path / 'models' / '.rocky-state.db'}?mode=ro", uri=True)
    try:  # the doctor only reads
        [(stamp,)] = conn.execute("SELECT last_evaluated_at FROM schedule_state").fetchall()
    finally:
        conn.close()
    assert stamp.startswith(future.strftime("%Y-%m-%dT%H:%M"))
