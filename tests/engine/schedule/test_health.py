"""Scheduler health (doctor) and the scheduler section of brief."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rocky_engine.schedule.health import scheduler_brief, scheduler_health
from rocky_engine.schedule.tick_lock import TickLock
from rocky_engine.state import StateStore
from rocky_engine.state.schedule import ScheduleRepo
from tests.engine.schedule.kit import T0, Clock, SimChild, project_at, reconciler, record_run, transformation

MODELS = {"a.sql": "select 1 as x\n"}


def test_no_data_without_schedules(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("plain"), MODELS)
    health = scheduler_health(project, T0)
    assert not health.applicable and health.status == "healthy"
    with StateStore.open(project.state_path(), writer=False) as store:
        section = scheduler_brief(project, store, None).wire()
    assert section == {"availability": "no_data", "reason": "no pipeline declares a [schedule]", "paused": [],
                       "holds": [], "consecutive_failures": [], "scheduled_pipelines": 0, "runs_in_window": 0,
                       "failed_in_window": 0, "incident_count": 0}
    from rocky_sdk.types_generated.brief_schema import BriefSchedulerSection  # the published shape

    BriefSchedulerSection.model_validate(section)


def test_never_ticked_is_a_warning(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("raw", 'cron = "*/5 * * * *"'), MODELS)
    health = scheduler_health(project, T0)
    assert (health.applicable, health.status, health.tick_lock) == (True, "warning", "never")
    assert "no tick has evaluated any schedule yet" in health.message


def test_dead_timer_after_twice_the_shortest_cron_interval(tmp_path: Path) -> None:
    body = transformation("raw", 'cron = "*/5 * * * *"') + transformation("daily", 'cron = "0 3 * * *"')
    project = project_at(tmp_path, body, MODELS)
    clock = Clock(T0)
    reconciler(clock, SimChild(clock)).tick(project)
    ok = scheduler_health(project, T0 + timedelta(minutes=10))
    assert ok.status == "healthy" and ok.shortest_interval_seconds == 300 and ok.tick_lock == "free"
    dead = scheduler_health(project, T0 + timedelta(minutes=10, seconds=1))
    assert dead.status == "warning" and "the timer looks dead" in dead.message
    assert dead.last_evaluated_at == T0


def test_wedged_lock_is_critical_and_a_held_one_is_fine(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("raw", 'cron = "*/5 * * * *"'), MODELS)
    clock = Clock(T0)
    reconciler(clock, SimChild(clock)).tick(project)
    lock = TickLock(project.dot_rocky, heartbeat_interval=3600)
    lock.acquire()
    try:
        # the heartbeat is judged against the wall clock passed in
        now = time.time()
        real_now = datetime.fromtimestamp(now, UTC)
        os.utime(lock.heartbeat_path, (now - 10, now - 10))
        with StateStore.open(project.state_path()) as store:
            ScheduleRepo(store).touch_evaluated(["raw"], real_now)
        held = scheduler_health(project, real_now)
        assert (held.status, held.tick_lock) == ("healthy", "held") and "in progress" in held.message
        os.utime(lock.heartbeat_path, (now - 400, now - 400))
        wedged = scheduler_health(project, real_now)
        assert wedged.status == "critical" and wedged.tick_lock == "wedged"
        assert f"pid {os.getpid()}" in wedged.message and "restart" in wedged.suggestions[0]
    finally:
        lock.release()


def test_brief_section_lists_holds_streaks_and_incidents(tmp_path: Path) -> None:
    body = (
        transformation("up")
        + transformation("p", 'after = ["up"]')
        + transformation("held", 'cron = "0 3 * * *"')
    )
    project = project_at(tmp_path, body, MODELS)
    record_run(project, "up", "Success", T0 - timedelta(hours=1))
    with StateStore.open(project.state_path()) as store:
        ScheduleRepo(store).set_paused("held", True, T0)
    clock = Clock(T0)
    rec = reconciler(clock, SimChild(clock, codes={"p": [1]}))
    rec.tick(project)
    clock.advance(minutes=6)
    rec.tick(project)
    with StateStore.open(project.state_path(), writer=False) as store:
        section = scheduler_brief(project, store, since=T0 + timedelta(minutes=1)).wire()
        everything = scheduler_brief(project, store, since=None).wire()
    assert section["availability"] == "available"
    # the names (the published shape) and since when each is held
    assert section["paused"] == ["held"]
    assert section["holds"] == [{"pipeline": "held", "paused_at": "2026-05-02T03:00:00.000Z"}]
    assert [(c["pipeline"], c["consecutive_failures"]) for c in section["consecutive_failures"]] == [("p", 2)]
    assert section["incident_count"] == 1 and everything["incident_count"] == 2
    assert section["incidents_kept"] == 2
    assert section["newest_incident"].endswith(".json") and "20260502T030" in section["newest_incident"]


def test_schedule_status_reads_stored_state_only(tmp_path: Path) -> None:
    from rocky_engine.schedule.view import schedule_status
    from rocky_engine.state.schedule_claims import ClaimRepo

    body = (
        transformation("raw", 'cron = "0 * * * *"')
        + transformation("p", 'after = ["raw"]')
        + transformation("broken", 'cron = "0 25 * * *"')
    )
    project = project_at(tmp_path, body, MODELS)
    clock = Clock(T0 + timedelta(minutes=1))
    rec = reconciler(clock, SimChild(clock, codes={"raw": [1]}))
    rec.tick(project)
    clock.set(T0 + timedelta(hours=1, seconds=5))
    rec.tick(project)
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(
            claim_key="p|after|x", pipeline="p", source="after", logical_ts=None, submission_id="s", now=T0
        )
    later = T0 + timedelta(hours=3)  # the timer stopped: the projection shows the missed 05:00 slot
    with StateStore.open(project.state_path(), writer=False) as store:
        status = schedule_status(project, store, later).wire()
    assert status["tick_lock"] == {"state": "free"}
    by_name = {p["pipeline"]: p for p in status["pipelines"]}
    raw = by_name["raw"]
    assert (raw["cron"], raw["last_fire_source"], raw["last_outcome"], raw["consecutive_failures"]) == (
        "0 * * * *",
        "cron",
        "failure",
        1,
    )
    assert (
        raw["next_fire_at"] == "2026-05-02T05:00:00.000Z" and raw["last_fire"] == "2026-05-02T04:00:05.000Z"
    )
    assert "throttle" not in raw  # the failure was 2 hours ago: 5 minutes of backoff are over
    assert by_name["p"]["after"] == ["raw"]
    assert "not a valid cron expression" in by_name["broken"]["config_error"]
    assert [c["claim_key"] for c in status["claims"]] == ["p|after|x"]
    with StateStore.open(project.state_path(), writer=False) as store:
        soon = schedule_status(project, store, T0 + timedelta(hours=1, minutes=3)).wire()
    assert {p["pipeline"]: p.get("throttle") for p in soon["pipelines"]}["raw"] == {
        "reason": "failure_backoff",
        "kind": "failure_backoff",
        "resume_at": "2026-05-02T04:05:06.000Z",
    }
