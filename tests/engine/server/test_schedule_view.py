"""``GET /api/v1/schedule`` and ``/schedule/spool`` over HTTP: lock states, the stalled-timer projection,
throttle, config errors, claims, and a spool that cannot be read."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rocky_engine.schedule.tick_lock import TickLock
from rocky_engine.state import StateStore
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import T0, Clock, SimChild, project_at, reconciler, transformation
from tests.engine.server.kit import GOOD_MODELS, InProcessServer, simple_project

SCHEDULED = (
    transformation("hourly", 'cron = "0 * * * *"')
    + transformation("after_hourly", 'after = ["hourly"]')
    + transformation("fresh", "freshness = true")
    + transformation("broken", 'cron = "0 * * * *"\ntimezone = "Mars/Olympus_Mons"')
    + "\n[freshness]\nexpected_lag_seconds = 3600\n"
)


def _get(srv: InProcessServer, path: str = "/api/v1/schedule") -> dict[str, Any]:
    with srv.client() as c:
        r = c.get(path)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["pipeline"]: p for p in doc["pipelines"]}


def test_a_fresh_project_never_ticked(tmp_path: Path) -> None:
    project = project_at(tmp_path, SCHEDULED, GOOD_MODELS)
    with InProcessServer(project.config.path) as srv:
        doc = _get(srv)
    assert doc["tick_lock"] == {"state": "never"}
    assert doc["scheduler"] == {"resident": False}
    pipelines = _by_name(doc)
    assert set(pipelines) == {"hourly", "after_hourly", "fresh", "broken"}
    assert pipelines["hourly"] == {
        "pipeline": "hourly", "enabled": True, "paused": False, "cron": "0 * * * *", "timezone": "UTC",
        "catchup": "latest", "awaiting_first_anchor": True, "consecutive_failures": 0,
    }
    assert pipelines["after_hourly"]["after"] == ["hourly"] and pipelines["fresh"]["freshness"] is True
    assert pipelines["broken"]["config_error"] == (
        "unknown timezone 'Mars/Olympus_Mons'; use an IANA name such as \"UTC\" or \"Europe/Lisbon\""
    )
    assert doc["claims"] == []


def test_a_stalled_timer_shows_the_slot_it_missed(tmp_path: Path) -> None:
    project = project_at(tmp_path, SCHEDULED, GOOD_MODELS)
    clock = Clock(T0 + timedelta(minutes=10))
    rec = reconciler(clock, SimChild(clock))
    rec.tick(project)  # first sight: anchors
    clock.set(T0 + timedelta(hours=1, seconds=30))
    rec.tick(project)  # fires the 04:00 slot; nothing ticks after that (the timer "stalled")
    with InProcessServer(project.config.path) as srv:
        doc = _get(srv)
    hourly = _by_name(doc)["hourly"]
    assert hourly["last_fire"] == "2026-05-02T04:00:30.000Z" and hourly["last_fire_source"] == "cron"
    # Anchored on the last fire, not on the clock: the 05:00 slot, long past, is what a reader sees.
    assert hourly["next_fire_at"] == "2026-05-02T05:00:00.000Z"
    assert str(hourly["next_fire_at"]) < str(doc["now"])
    assert hourly["last_evaluated_at"] == "2026-05-02T04:00:30.000Z"
    assert hourly["last_outcome"] == "success"
    assert doc["tick_lock"] == {"state": "free"}


def test_throttle_and_claims_are_reported(tmp_path: Path) -> None:
    project = project_at(tmp_path, SCHEDULED, GOOD_MODELS)
    clock = Clock(datetime.now(UTC) - timedelta(seconds=30))
    rec = reconciler(clock, SimChild(clock, codes={"fresh": [1]}))
    rec.tick(project)
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(claim_key="webhook|abc", pipeline="hourly", source="webhook",
                                logical_ts=T0, submission_id="sub-abc", now=T0)
    with InProcessServer(project.config.path) as srv:
        doc = _get(srv)
    fresh = _by_name(doc)["fresh"]
    assert fresh["consecutive_failures"] == 1 and fresh["last_outcome"] == "failure"
    throttle = fresh["throttle"]
    assert throttle["reason"] == "failure_backoff"
    assert str(throttle["resume_at"]) > str(doc["now"])
    [claim] = doc["claims"]
    assert claim["claim_key"] == "webhook|abc" and claim["state"] == "submitted"
    assert claim["submission_id"] == "sub-abc"


def test_tick_lock_held_and_wedged(tmp_path: Path) -> None:
    project = project_at(tmp_path, SCHEDULED, GOOD_MODELS)
    lock = TickLock(project.dot_rocky, heartbeat_interval=3600)
    assert lock.acquire() == "acquired"
    try:
        with InProcessServer(project.config.path) as srv:
            held = _get(srv)
            old = time.time() - 1000
            os.utime(project.dot_rocky / "tick.lock.heartbeat", (old, old))
            wedged = _get(srv)
    finally:
        lock.release()
    assert held["tick_lock"]["state"] == "held"
    assert wedged["tick_lock"]["state"] == "wedged"
    assert wedged["tick_lock"]["heartbeat_age_seconds"] >= 999


def test_a_broken_rocky_toml_is_surfaced_with_the_last_good_pipelines(tmp_path: Path) -> None:
    project = project_at(tmp_path, SCHEDULED, GOOD_MODELS)
    with InProcessServer(project.config.path, scheduler=True, poll_interval_seconds=3600) as srv:
        srv.first_tick()
        project.config.path.write_text("[pipeline.x\n", encoding="utf-8")
        doc = _get(srv)
    assert "rocky.toml" in str(doc["config_error"])
    assert "hourly" in _by_name(doc)
    assert doc["scheduler"]["resident"] is True
    assert doc["scheduler"]["poll_interval_seconds"] == 3600
    assert doc["scheduler"]["last_tick"]["result"] == "completed"


def test_spool_lists_waiting_demands(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    with InProcessServer(config, scheduler=True, poll_interval_seconds=3600) as srv, srv.client() as c:
        srv.first_tick()
        accepted = c.post("/api/v1/hooks/trigger/orders", content=b"1",
                          headers={"X-Rocky-Delivery": "evt-42"}).json()
        doc = c.get("/api/v1/schedule/spool").json()
    assert doc["action"] == "spool" and doc["spool"].endswith(".rocky/pending-demands")
    [demand] = doc["demands"]
    assert demand["demand_uid"] == accepted["demand_uid"]
    assert (demand["pipeline"], demand["delivery_id"]) == ("orders", "evt-42")


def test_an_unreadable_spool_is_an_error_not_an_empty_queue(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    dot = tmp_path / ".rocky"
    dot.mkdir()
    (dot / "pending-demands").symlink_to(tmp_path / "gone")
    with InProcessServer(config) as srv, srv.client() as c:
        r = c.get("/api/v1/schedule/spool")
        metrics = c.get("/metrics").text
    assert r.status_code == 500 and r.json()["code"] == "spool_unreadable"
    assert "dangling symlink" in r.json()["message"]
    assert "rocky_webhook_spool_readable 0" in metrics
