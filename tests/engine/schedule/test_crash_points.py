"""Crash points: the reconciler killed with SIGKILL after the claim and before the spawn, during the child,
and after the child but before finalizing. On restart nothing fires twice and nothing stays ``submitted``.

The reconciler runs in a driver process whose spawner kills its own process (a real ``kill -9``) at the
chosen point; the children are real ``rocky run`` processes; the restart is the real ``rocky tick``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocky_engine.state import StateStore
from rocky_engine.state.claims import ClaimRepo
from tests.engine.schedule.kit import tick_json, transformation, write_project

DRIVER = """
import os, signal, sys
from datetime import datetime
from rocky_engine.project import load_project
from rocky_engine.schedule.reconciler import Reconciler
from rocky_engine.schedule.spawner import SubprocessSpawner

point, now = sys.argv[1], datetime.fromisoformat(sys.argv[2])

def die():
    os.kill(os.getpid(), signal.SIGKILL)

class CrashingSpawner(SubprocessSpawner):
    def run(self, request, on_start=None):
        if point == "after_claim":
            die()
        if point == "during_child":
            def started(pid):
                on_start(pid)
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


def crash(root: Path, point: str, now: str) -> subprocess.CompletedProcess[str]:
    # capture_output waits for the pipes to close: a child that outlived the driver finishes first
    return subprocess.run(
        [sys.executable, "-c", DRIVER, point, now], cwd=root, capture_output=True, text=True, timeout=120
    )


def claims(root: Path) -> list[tuple[str, str, str | None]]:
    with StateStore.open(root / "models" / ".rocky-state.db", writer=False) as store:
        return [(c.claim_key, c.state, c.outcome) for c in ClaimRepo(store).recent()]


def runs(root: Path) -> list[tuple[str | None, str]]:
    with StateStore.open(root / "models" / ".rocky-state.db", writer=False) as store:
        return [(r.pipeline, r.status) for r in store.runs.list()]


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
def test_killed_during_the_child(project: Path) -> None:
    proc = crash(project, "during_child", "2026-05-02T04:00:30+00:00")
    assert proc.returncode == -9
    # the child outlived its reconciler and recorded its run
    assert runs(project) == [("models", "Success")]
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "submitted", None)]
    code, doc = tick_json(project, "--now", "2026-05-02T04:01:00Z")
    assert code == 0 and doc["executed"] == []
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "completed", "success")]
    assert runs(project) == [("models", "Success")]
    assert not (project / ".rocky" / "incidents").exists()


@pytest.mark.slow
def test_killed_after_the_child_before_finalizing(project: Path) -> None:
    proc = crash(project, "after_child", "2026-05-02T04:00:30+00:00")
    assert proc.returncode == -9
    assert runs(project) == [("models", "Success")]
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "submitted", None)]
    code, doc = tick_json(project, "--now", "2026-05-02T04:00:40Z")
    assert code == 0 and doc["executed"] == []
    assert claims(project) == [(f"models|cron|{OCCURRENCE}", "completed", "success")]
    # the next occurrence fires normally, once
    code, doc = tick_json(project, "--now", "2026-05-02T05:00:10Z")
    assert [e["logical_ts"] for e in doc["executed"]] == ["2026-05-02T05:00:00.000Z"]
    assert runs(project) == [("models", "Success"), ("models", "Success")]
    assert [s for _, s, _ in claims(project)] == ["completed", "completed"]
