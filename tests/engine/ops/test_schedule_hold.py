"""``rocky state schedule pause|resume``: the document the published client reads (``ScheduleHoldOutput``:
``changed`` and ``state_path`` required) and the idempotence it promises (a repeated pause is not a second
action: ``changed: false``, the first ``paused_at`` kept)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rocky_sdk.types_generated.state_schedule_hold_schema import ScheduleHoldOutput

from rocky_engine.state.schedule import ScheduleRepo
from rocky_engine.state.store import StateStore
from tests.engine.hooks.kit import make_project
from tests.fixtures.inprocess import InProcess, rocky_in_process

EARLIER = datetime(2026, 5, 1, 3, 0, tzinfo=UTC)


def _hold(config: Path, action: str, *more: str) -> InProcess:
    return rocky_in_process(["-c", str(config), "state", "schedule", action, "models", *more])


def _json(config: Path, action: str) -> dict[str, Any]:
    res = _hold(config, action, "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    ScheduleHoldOutput.model_validate(doc)
    assert isinstance(doc, dict)
    return doc


def test_pause_and_resume_validate_and_say_whether_they_changed_the_hold(tmp_path: Path) -> None:
    config = make_project(tmp_path, seed=False)
    store = tmp_path / "models" / ".rocky-state.db"
    first = _json(config, "pause")
    assert (first["paused"], first["changed"], first["state_path"]) == (True, True, str(store))
    assert first["paused_at"]
    resumed = _json(config, "resume")
    assert (resumed["paused"], resumed["changed"], resumed["state_path"]) == (False, True, str(store))
    assert "paused_at" not in resumed
    again = _json(config, "resume")
    assert (again["paused"], again["changed"]) == (False, False)
    with StateStore.open(store, writer=False) as db:
        row = ScheduleRepo(db).get("models")
    assert row is not None and not row.paused


def test_a_repeated_pause_keeps_the_first_paused_at(tmp_path: Path) -> None:
    config = make_project(tmp_path, seed=False)
    with StateStore.open(tmp_path / "models" / ".rocky-state.db") as db:
        ScheduleRepo(db).hold("models", True, EARLIER)
    doc = _json(config, "pause")
    assert (doc["paused"], doc["changed"], doc["paused_at"]) == (True, False, "2026-05-01T03:00:00.000Z")
    text = _hold(config, "pause", "--output", "table")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("models already paused since 2026-05-01T03:00:00.000Z"), text.stdout
    assert _hold(config, "resume", "--output", "table").stdout.startswith("resumed models")
    assert _hold(config, "resume", "--output", "table").stdout.startswith("models is not paused")
