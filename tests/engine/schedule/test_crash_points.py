"""Crash points: the reconciler killed with SIGKILL after the claim and before the spawn, during the child,
and after the child but before finalizing. On restart nothing fires twice and nothing stays ``submitted``.

The reconciler runs in a driver process whose spawner kills its own process (a real ``kill -9``) at the
chosen point; the children are real ``rocky run`` processes; the restart is the real ``rocky tick``. A child
never outlives its reconciler for long: it gets SIGTERM when the reconciler dies and records an interrupted
run, which the restart honours.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocky_engine.schedule.claim_lifecycle import outcome_of_status
from rocky_engine.state import RunRecord, StateStore
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.process.kit import dead, sleeping_hook, wait_for_hook
from tests.engine.schedule.kit import tick_json, transformation, write_project

DRIVER = """
import os, signal, sys, time
from datetime import datetime
from rocky_engine.project import load_project
from rocky_engine.schedule.reconciler import Reconciler
from rocky_engine.schedule.spawner import SubprocessSpawner

point, now = sys.argv[1], datetime.fromisoformat(sys.argv[2])
hook_started = sys.argv[3] if len(sys.argv) > 3 else None

def die():
    os.kill(os.getpid(), signal.SIGKILL)

class CrashingSpawner(SubprocessSpawner):
    def run(self, request, on_start=None):
        if point == "after_claim":
            die()
        if point == "during_child":
            def started(pid):
                on_start(pid)
                if hook_started:  # die once the child is inside its run (its hook runs)
                    while not os.path.exists(hook_started):
                        time.sleep(0.02)
                die()
            return super().run(request, started)
        result = super().run(request, on_start)
        if point == "after_child":
            die()
        return result

Reconciler(spawner=CrashingSpawner(), clock=lambda: now).tick(load_project("rocky.toml"))
print("survived")
"""

OCCURRENCE = "2026-05-02T04:00:00.000000Z"


def crash(root: Path, point: str, now: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # capture_output waits for the pipes to close: a child still stopping after the driver died ends first
    return subprocess.run(
        [sys.executable, "-c", DRIVER, point, now, *extra], cwd=root, capture_output=True, text=True,
        timeout=120,
    )


def claims(root: Path) -> list[tuple[str, str, str | None]]:
    with StateStore.open(root / "models" / ".rocky-state.db", writer=False) as store:
        return [(c.claim_key, c.state, c.outcome) for c in ClaimRepo(store).recent()]


def records(root: Path) -> list[RunRecord]:
    with StateStore.open(root / "models" / ".rocky-state.db", writer=False) as store:
        return list(store.runs.list())


def pid_files(root: Path) -> list[Path]:
    """``.rocky/running/*.json``: which pid runs which submission (issue 13 item 9)."""
    return sorted((root / ".rocky" / "running").glob("*.json"))


def runs(root: Path) -> list[tuple[str | None, str]]:
    return [(r.pipeline, r.status) for r in records(root)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_project(tmp_path, transformation("models", 'cron = "0 * * * *"'), {"good.sql": "select 1 as x\n"})
    code, _ = tick_json(tmp_path, "--now", "2026-05-02T03:10:00Z")  # first sight
    assert code == 0
    return tmp_path


@pytest.mark.slow
def test_killed_after_the_claim_before_the_spawn(project: Path) -> None:
    proc = crash(project, "after_claim", "2026-05-02T04:00:30+00:00")
    assert proc.returncode == -9 and "survived" not in proc.stdout
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "submitted", None)]
    assert runs(project) == []
    # restart within 5 minutes: the claim is in flight, the occurrence is not fired again
    code, doc = tick_json(project, "--now", "2026-05-02T04:02:00Z")
    assert code == 0 and doc["executed"] == []
    assert doc["skipped"][0]["reason"] == "in_flight"
    # after 5 minutes with no run record: finalized as a failure, never re-run
    code, doc = tick_json(project, "--now", "2026-05-02T04:06:00Z")
    assert code == 0 and doc["executed"] == []
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "completed", "failure")]
    assert runs(project) == []
    [incident] = list((project / ".rocky" / "incidents").iterdir())
    assert json.loads(incident.read_text())["exit_code"] is None


@pytest.mark.slow
def test_killed_during_the_child(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    body = transformation("models", 'cron = "0 * * * *"') + sleeping_hook(pids)
    write_project(tmp_path, body, {"good.sql": "select 1 as x\n"})
    code, _ = tick_json(tmp_path, "--now", "2026-05-02T03:10:00Z")  # first sight
    assert code == 0
    proc = crash(tmp_path, "during_child", "2026-05-02T04:00:30+00:00", str(pids / "sleep"))
    assert proc.returncode == -9
    # the child did not outlive its reconciler: SIGTERM stopped its hook, it recorded an interrupted run
    sh, sleep = wait_for_hook(pids, timeout=0)
    assert dead(sh) and dead(sleep)
    [record] = records(tmp_path)
    assert record.interrupted and record.pipeline == "models"
    assert claims(tmp_path) == [(f"models|cron|{OCCURRENCE}", "submitted", None)]
    assert len(pid_files(tmp_path)) == 1  # the dead reconciler could not remove its child's pid file
    # the restart honours the record, whatever it says
    code, doc = tick_json(tmp_path, "--now", "2026-05-02T04:01:00Z")
    assert doc["executed"] == []
    assert pid_files(tmp_path) == []  # removed once its claim resolved
    assert claims(tmp_path) == [(f"models|cron|{OCCURRENCE}", "completed", outcome_of_status(record.status))]
    assert len(records(tmp_path)) == 1


@pytest.mark.slow
def test_killed_after_the_child_before_finalizing(project: Path) -> None:
    proc = crash(project, "after_child", "2026-05-02T04:00:30+00:00")
    assert proc.returncode == -9
    assert runs(project) == [("models", "Success")]
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "submitted", None)]
    assert len(pid_files(project)) == 1
    code, doc = tick_json(project, "--now", "2026-05-02T04:00:40Z")
    assert code == 0 and doc["executed"] == []
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "completed", "success")]
    assert pid_files(project) == []
    # the next occurrence fires normally, once
    code, doc = tick_json(project, "--now", "2026-05-02T05:00:10Z")
    assert [e["logical_ts"] for e in doc["executed"]] == ["2026-05-02T05:00:00.000Z"]
    assert runs(project) == [("models", "Success"), ("models", "Success")]
    assert [s for _, s, _ in claims(project)] == ["completed", "completed"]
