"""The reconciler as a library: injected clock, a child that records runs; real state store on disk."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

import pytest

from rocky_engine.errors import ConfigError
from rocky_engine.schedule.claim_lifecycle import claim_key
from rocky_engine.state import StateStore
from rocky_engine.state.schedule import ScheduleRepo
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import (
    T0,
    Clock,
    SimChild,
    project_at,
    reconciler,
    record_run,
    sources,
    transformation,
)

MODELS = {"a.sql": "select 1 as x\n"}


def cascade_body() -> str:
    return (
        transformation("raw", 'cron = "0 * * * *"')
        + transformation("staging", 'after = ["raw"]')
        + transformation("marts", 'after = ["staging"]')
    )


def test_cron_first_sight_then_next_occurrence(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("raw", 'cron = "0 * * * *"'), MODELS)
    clock = Clock(T0 + timedelta(minutes=10))
    child = SimChild(clock)
    rec = reconciler(clock, child)
    first = rec.tick(project)
    assert sources(first, "raw") == {"cron": "not_due"} and child.calls == []
    assert first.exit_code() == 0
    clock.set(T0 + timedelta(minutes=59))
    assert rec.tick(project).executed == []
    clock.set(T0 + timedelta(hours=1, seconds=30))
    out = rec.tick(project)
    assert [(e.pipeline, e.source, e.logical_ts, e.outcome) for e in out.executed] == [
        ("raw", "cron", "2026-05-02T04:00:00.000Z", "success")
    ]
    assert (
        child.calls[0].trigger == "schedule" and child.calls[0].submission_id == out.executed[0].submission_id
    )
    # the occurrence fired; a later tick in the same hour does not fire it again
    clock.advance(minutes=5)
    assert rec.tick(project).executed == []
    with StateStore.open(project.state_path(), writer=False) as store:
        row = ScheduleRepo(store).get("raw")
        assert row is not None and row.cron_anchor == T0 + timedelta(hours=1)
        assert row.next_fire_at == T0 + timedelta(hours=2) and row.last_fire_source == "cron"
        assert store.runs.by_submission_id(out.executed[0].submission_id) is not None


def test_after_cascade_runs_downstream_in_the_same_tick(tmp_path: Path) -> None:
    project = project_at(tmp_path, cascade_body(), MODELS)
    clock = Clock(T0 + timedelta(minutes=30))
    child = SimChild(clock)
    rec = reconciler(clock, child)
    rec.tick(project)  # anchors raw; staging/marts wait on upstreams that never ran
    clock.set(T0 + timedelta(hours=1, minutes=1))
    out = rec.tick(project)
    assert [(e.pipeline, e.source) for e in out.executed] == [
        ("raw", "cron"),
        ("staging", "after"),
        ("marts", "after"),
    ]
    assert out.counts.executed == 3 and out.counts.succeeded == 3 and out.exit_code() == 0
    # nothing new upstream: the after sources are satisfied
    clock.advance(minutes=1)
    again = rec.tick(project)
    assert again.executed == []
    assert sources(again, "staging") == {"after": "not_due"}


def test_partial_upstream_does_not_trigger_after(tmp_path: Path) -> None:
    project = project_at(tmp_path, cascade_body(), MODELS)
    clock = Clock(T0 + timedelta(minutes=30))
    child = SimChild(clock, codes={"raw": [2]})
    rec = reconciler(clock, child)
    rec.tick(project)
    clock.set(T0 + timedelta(hours=1, minutes=1))
    out = rec.tick(project)
    assert [(e.pipeline, e.outcome) for e in out.executed] == [("raw", "partial")]
    assert out.exit_code() == 2
    assert sources(out, "staging") == {"after": "not_due"}


def test_priority_cron_supersedes_after_and_freshness(tmp_path: Path) -> None:
    body = transformation("up", 'after = []\nfreshness = false\ncron = "0 0 1 1 *"') + transformation(
        "p", 'cron = "0 * * * *"\nafter = ["up"]\nfreshness = true'
    )
    project = project_at(tmp_path, body + "\n[freshness]\nexpected_lag_seconds = 60\n", MODELS)
    clock = Clock(T0)
    child = SimChild(clock)
    rec = reconciler(clock, child)
    record_run(project, "up", "Success", T0 - timedelta(minutes=5))
    first = rec.tick(project)
    # first sight of the cron; after is due (up succeeded, p never did) and wins; freshness superseded
    assert sources(first, "p") == {"cron": "not_due", "after": "due", "freshness": "superseded"}
    assert [e.source for e in first.executed] == ["after"]
    record_run(project, "up", "Success", T0 + timedelta(minutes=10))
    clock.set(T0 + timedelta(hours=1, seconds=5))
    out = rec.tick(project)
    assert sources(out, "p") == {"cron": "due", "after": "superseded", "freshness": "superseded"}
    assert [e.source for e in out.executed] == ["cron"]


def test_freshness_without_history_fires_and_then_respects_the_budget(tmp_path: Path) -> None:
    models = {"a.sql": "select 1 as x\n", "a.toml": "freshness = { max_lag_seconds = 600 }\n"}
    project = project_at(tmp_path, transformation("fresh", "freshness = true"), models)
    clock = Clock(T0)
    child = SimChild(clock)
    rec = reconciler(clock, child)
    out = rec.tick(project)  # never succeeded: due at once
    assert [(e.source, e.outcome) for e in out.executed] == [("freshness", "success")]
    clock.advance(seconds=600)  # finished at T0+1s: lag 599 s, within the 600 s model budget
    assert rec.tick(project).executed == []
    clock.advance(seconds=2)
    assert [e.source for e in rec.tick(project).executed] == ["freshness"]


def test_freshness_uses_project_budget_with_history(tmp_path: Path) -> None:
    body = transformation("fresh", "freshness = true") + "\n[freshness]\nexpected_lag_seconds = 3600\n"
    project = project_at(tmp_path, body, MODELS)
    record_run(project, "fresh", "Success", T0 - timedelta(minutes=30))
    clock = Clock(T0)
    rec = reconciler(clock, SimChild(clock))
    assert sources(rec.tick(project), "fresh") == {"freshness": "not_due"}
    clock.advance(minutes=31)
    assert sources(rec.tick(project), "fresh") == {"freshness": "due"}


def test_freshness_without_any_budget_is_a_config_error(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("fresh", "freshness = true"), MODELS)
    clock = Clock(T0)
    out = reconciler(clock, SimChild(clock)).tick(project)
    assert sources(out, "fresh") == {"freshness": "config_error"}
    assert out.skipped[0].reason == "config_error" and "no budget" in (out.skipped[0].detail or "")


def test_failure_backoff_ladder_and_partial_backoff(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("up") + transformation("p", 'after = ["up"]'), MODELS)
    record_run(project, "up", "Success", T0 - timedelta(hours=1))
    clock = Clock(T0)
    child = SimChild(clock, codes={"p": [1]})
    rec = reconciler(clock, child)
    expected_waits = [5, 10, 20, 40, 80, 160, 320, 360, 360]
    for n, minutes in enumerate(expected_waits, start=1):
        out = rec.tick(project)
        assert [(e.pipeline, e.outcome) for e in out.executed] == [("p", "failure")], n
        assert out.exit_code() == 2
        finished = clock.now
        clock.set(finished + timedelta(minutes=minutes) - timedelta(seconds=1))
        held = rec.tick(project)
        assert held.executed == [] and held.exit_code() == 0
        skip = held.skipped[0]
        assert (skip.pipeline, skip.source, skip.reason) == ("p", "after", "failure_backoff")
        assert skip.resume_at == (finished + timedelta(minutes=minutes)).isoformat(
            timespec="milliseconds"
        ).replace("+00:00", "Z")
        clock.set(finished + timedelta(minutes=minutes))
    with StateStore.open(project.state_path(), writer=False) as store:
        row = ScheduleRepo(store).get("p")
        assert row is not None and row.consecutive_failures == len(expected_waits)
    # a partial run: fixed 60 minutes
    child.codes["p"] = [2]
    out = rec.tick(project)
    assert [e.outcome for e in out.executed] == ["partial"]
    finished = clock.now
    clock.set(finished + timedelta(minutes=59))
    held = rec.tick(project)
    assert [(s.reason, s.resume_at) for s in held.skipped] == [
        (
            "partial_backoff",
            (finished + timedelta(minutes=60)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        )
    ]
    child.codes["p"] = [0]
    clock.set(finished + timedelta(minutes=60))
    assert [e.outcome for e in rec.tick(project).executed] == ["success"]
    with StateStore.open(project.state_path(), writer=False) as store:
        row = ScheduleRepo(store).get("p")
        assert row is not None and row.consecutive_failures == 0 and row.last_outcome == "success"


def test_cron_never_backs_off(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("raw", 'cron = "*/5 * * * *"'), MODELS)
    clock = Clock(T0 - timedelta(minutes=1))
    child = SimChild(clock, codes={"raw": [1]})
    rec = reconciler(clock, child)
    rec.tick(project)
    fired = []
    for minute in range(0, 16):
        clock.set(T0 + timedelta(minutes=minute, seconds=10))
        fired += [e.logical_ts for e in rec.tick(project).executed]
    assert fired == [f"2026-05-02T03:{m:02d}:00.000Z" for m in (0, 5, 10, 15)]


def test_in_tick_retry_up_to_retry_max(tmp_path: Path) -> None:
    project = project_at(
        tmp_path, transformation("up") + transformation("p", 'after = ["up"]\nretry = { max = 2 }'), MODELS
    )
    record_run(project, "up", "Success", T0 - timedelta(hours=1))
    clock = Clock(T0)
    child = SimChild(clock, codes={"p": [1, 1, 0]})
    out = reconciler(clock, child).tick(project)
    assert [(e.outcome, e.attempts) for e in out.executed] == [("success", 3)]
    assert len({c.submission_id for c in child.calls}) == 1 and [c.attempt for c in child.calls] == [1, 2, 3]
    with StateStore.open(project.state_path(), writer=False) as store:
        claims = ClaimRepo(store).recent()
        assert [(c.state, c.outcome, c.attempts) for c in claims] == [("completed", "success", 3)]
    # retries exhausted: one failure after 1 + max attempts
    child2 = SimChild(clock, codes={"p": [1]})
    record_run(project, "up", "Success", clock.now + timedelta(seconds=5))
    clock.advance(minutes=1)
    out2 = reconciler(clock, child2).tick(project)
    assert [(e.outcome, e.attempts) for e in out2.executed] == [("failure", 3)] and len(child2.calls) == 3
    assert out2.executed[0].incident is not None


def test_timeout_minutes_is_passed_to_the_spawner(tmp_path: Path) -> None:
    project = project_at(
        tmp_path,
        transformation("p", "freshness = true\ntimeout_minutes = 7")
        + "\n[freshness]\nexpected_lag_seconds = 60\n",
        MODELS,
    )
    clock = Clock(T0)
    child = SimChild(clock)
    reconciler(clock, child).tick(project)
    assert child.calls[0].timeout_seconds == 420
    assert child.calls[0].state_path == project.state_path() and child.calls[0].state_path.is_absolute()


def test_dry_run_writes_and_spawns_nothing(tmp_path: Path) -> None:
    project = project_at(tmp_path, cascade_body(), MODELS)
    clock = Clock(T0 + timedelta(minutes=30))
    child = SimChild(clock)
    rec = reconciler(clock, child)
    rec.tick(project)  # anchors
    state = project.state_path()
    digest = hashlib.sha256(state.read_bytes()).hexdigest()
    lock_files = sorted(p.name for p in (tmp_path / ".rocky").iterdir())
    hb_mtime = (tmp_path / ".rocky" / "tick.lock.heartbeat").stat().st_mtime
    clock.set(T0 + timedelta(hours=1, minutes=1))
    out = rec.tick(project, dry_run=True)
    assert out.dry_run and out.executed == [] and child.calls == []
    assert sources(out, "raw") == {"cron": "due"} and out.counts.due == 1
    assert hashlib.sha256(state.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in (tmp_path / ".rocky").iterdir()) == lock_files
    assert (tmp_path / ".rocky" / "tick.lock.heartbeat").stat().st_mtime == hb_mtime
    # a fresh project: a dry run creates no state file and no .rocky directory
    fresh = project_at(tmp_path / "fresh", cascade_body(), MODELS)
    reconciler(clock, child).tick(fresh, dry_run=True)
    assert not fresh.state_path().exists() and not (tmp_path / "fresh" / ".rocky").exists()


def test_paused_disabled_and_config_errors_never_fire(tmp_path: Path) -> None:
    body = (
        transformation("off", 'cron = "* * * * *"\nenabled = false')
        + transformation("bad_tz", 'cron = "* * * * *"\ntimezone = "Mars/Olympus"')
        + transformation("bad_cron", 'cron = "99 * * * *"')
        + transformation("held", 'cron = "* * * * *"')
    )
    project = project_at(tmp_path, body, MODELS)
    clock = Clock(T0)
    child = SimChild(clock)
    rec = reconciler(clock, child)
    with StateStore.open(project.state_path()) as store:
        ScheduleRepo(store).set_paused("held", True, T0)
    for _ in range(3):
        out = rec.tick(project)
        clock.advance(minutes=1)
    assert child.calls == []
    assert sources(out, "off") == {"cron": "disabled"}
    assert sources(out, "bad_tz") == {"cron": "config_error"}
    assert sources(out, "bad_cron") == {"cron": "config_error"}
    assert sources(out, "held") == {"cron": "paused"}
    assert {(s.pipeline, s.reason) for s in out.skipped} == {
        ("off", "disabled"),
        ("bad_tz", "config_error"),
        ("bad_cron", "config_error"),
        ("held", "paused"),
    }
    assert out.exit_code() == 0


def test_after_cycle_is_a_config_error(tmp_path: Path) -> None:
    body = transformation("a", 'after = ["b"]') + transformation("b", 'after = ["a"]')
    project = project_at(tmp_path, body, MODELS)
    clock = Clock(T0)
    with pytest.raises(ConfigError, match=r"schedule after cycle detected involving: \['a', 'b'\]"):
        reconciler(clock, SimChild(clock)).tick(project)
    assert not (tmp_path / ".rocky").exists()


def test_pipeline_flag_restricts_the_tick(tmp_path: Path) -> None:
    project = project_at(tmp_path, cascade_body(), MODELS)
    clock = Clock(T0)
    out = reconciler(clock, SimChild(clock)).tick(project, pipeline="staging")
    assert [e.pipeline for e in out.evaluated] == ["staging"]
    with pytest.raises(ConfigError, match="unknown pipeline 'nope'"):
        reconciler(clock, SimChild(clock)).tick(project, pipeline="nope")


def test_stuck_claim_is_resolved_from_the_run_record(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("raw", 'cron = "0 * * * *"'), MODELS)
    clock = Clock(T0 + timedelta(minutes=1))
    rec = reconciler(clock, SimChild(clock))
    rec.tick(project)
    # An earlier reconciler claimed 04:00 and died; its child recorded a failure.
    key = claim_key("raw", "cron", T0 + timedelta(hours=1))
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(
            claim_key=key,
            pipeline="raw",
            source="cron",
            logical_ts=T0 + timedelta(hours=1),
            submission_id="deadbeef" * 4,
            now=T0 + timedelta(hours=1),
        )
        row = ScheduleRepo(store).get("raw")
        assert row is not None
        ScheduleRepo(store).upsert_many(
            [row.with_(cron_anchor=T0 + timedelta(hours=1), next_fire_at=T0 + timedelta(hours=2))]
        )
    record_run(project, "raw", "Failure", T0 + timedelta(hours=1), submission_id="deadbeef" * 4)
    clock.set(T0 + timedelta(hours=1, minutes=2))
    out = rec.tick(project)
    assert out.executed == []  # the 04:00 occurrence is not fired twice
    with StateStore.open(project.state_path(), writer=False) as store:
        claim = ClaimRepo(store).get(key)
        assert claim is not None and (claim.state, claim.outcome, claim.exit_code) == (
            "completed",
            "failure",
            None,
        )
        row = ScheduleRepo(store).get("raw")
        assert row is not None and row.consecutive_failures == 1 and row.last_outcome == "failure"
    bundles = sorted((tmp_path / ".rocky" / "incidents").iterdir())
    doc = json.loads(bundles[0].read_text())
    assert doc["exit_code"] is None and doc["submission_id"] == "deadbeef" * 4 and doc["source"] == "cron"
    assert doc["pointers"][0]["kind"] == "history"


def test_submitted_claim_without_record_is_in_flight_then_failed_after_five_minutes(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("up") + transformation("p", 'after = ["up"]'), MODELS)
    record_run(project, "up", "Success", T0 - timedelta(hours=1))
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(
            claim_key="p|after|x",
            pipeline="p",
            source="after",
            logical_ts=T0,
            submission_id="ab" * 16,
            now=T0,
        )
    clock = Clock(T0 + timedelta(minutes=4, seconds=59))
    child = SimChild(clock)
    rec = reconciler(clock, child)
    out = rec.tick(project)
    assert sources(out, "p") == {"after": "in_flight"} and child.calls == []
    clock.set(T0 + timedelta(minutes=5))
    out = rec.tick(project)
    # finalized as a failure (never retried as such), so the after source sits in failure backoff now
    assert out.executed == [] and sources(out, "p") == {"after": "failure_backoff"}
    with StateStore.open(project.state_path(), writer=False) as store:
        assert ClaimRepo(store).submitted() == []


def test_orphan_sweep_finalizes_claims_of_pipelines_not_due(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("raw", 'cron = "0 0 1 1 *"'), MODELS)
    clock = Clock(T0)
    rec = reconciler(clock, SimChild(clock))
    with StateStore.open(project.state_path()) as store:
        for name, sub in (("gone", "11" * 16), ("unscheduled", "22" * 16)):
            ClaimRepo(store).submit(
                claim_key=f"{name}|cron|x",
                pipeline=name,
                source="cron",
                logical_ts=T0,
                submission_id=sub,
                now=T0 - timedelta(minutes=10),
            )
    record_run(project, "unscheduled", "Success", T0 - timedelta(minutes=9), submission_id="22" * 16)
    out = rec.tick(project)
    assert [e.pipeline for e in out.evaluated] == ["raw"]
    with StateStore.open(project.state_path(), writer=False) as store:
        assert ClaimRepo(store).submitted() == []
        assert ClaimRepo(store).get("gone|cron|x").outcome == "failure"  # type: ignore[union-attr]
        assert ClaimRepo(store).get("unscheduled|cron|x").outcome == "success"  # type: ignore[union-attr]
    assert len(list((tmp_path / ".rocky" / "incidents").iterdir())) == 1


def test_state_busy_skips_the_tick(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("raw", 'cron = "* * * * *"'), MODELS)
    clock = Clock(T0)
    with StateStore.open(project.state_path()):
        out = reconciler(clock, SimChild(clock)).tick(project)
    assert out.exit_code() == 0 and out.evaluated == []
    assert [(s.pipeline, s.source, s.reason) for s in out.skipped] == [(None, None, "state_busy")]
    assert out.wire()["skipped"] == [{"reason": "state_busy"}]  # whole-tick: no pipeline, no source
    assert out.counts.skipped == 1


def test_last_evaluated_is_stamped_each_tick(tmp_path: Path) -> None:
    project = project_at(tmp_path, cascade_body(), MODELS)
    clock = Clock(T0)
    rec = reconciler(clock, SimChild(clock))
    rec.tick(project)
    clock.advance(minutes=1)
    rec.tick(project)
    with StateStore.open(project.state_path(), writer=False) as store:
        rows = ScheduleRepo(store).all()
    assert {n: r.last_evaluated_at for n, r in rows.items()} == {
        "raw": clock.now,
        "staging": clock.now,
        "marts": clock.now,
    }


def test_catchup_latest_and_skip_after_a_long_outage(tmp_path: Path) -> None:
    body = transformation("latest", 'cron = "0 3 * * *"') + transformation(
        "skipper", 'cron = "0 3 * * *"\ncatchup = "skip"'
    )
    project = project_at(tmp_path, body, MODELS)
    clock = Clock(T0 - timedelta(hours=1))
    child = SimChild(clock)
    rec = reconciler(clock, child)
    rec.tick(project)  # anchors at 02:00 on May 2
    clock.set(T0 + timedelta(days=3, hours=6))  # down until May 5 09:00
    out = rec.tick(project)
    assert [(e.pipeline, e.logical_ts) for e in out.executed] == [("latest", "2026-05-05T03:00:00.000Z")]
    [latest] = [e for e in out.evaluated if e.pipeline == "latest"]
    assert latest.sources[0].missed == 3
    assert [(s.pipeline, s.reason, s.missed) for s in out.skipped] == [("skipper", "catchup_skipped", 4)]
    # both anchors moved: the next day fires both once
    clock.set(T0 + timedelta(days=4, seconds=30))
    assert sorted(e.pipeline for e in rec.tick(project).executed) == ["latest", "skipper"]


def test_dst_spring_forward_through_the_reconciler(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    project = project_at(
        tmp_path, transformation("ny", 'cron = "30 2 * * *"\ntimezone = "America/New_York"'), MODELS
    )
    clock = Clock(datetime(2026, 3, 8, 6, 0, tzinfo=UTC))  # 01:00 EST
    child = SimChild(clock)
    rec = reconciler(clock, child)
    fired = []
    for minutes in range(0, 180, 5):
        clock.set(datetime(2026, 3, 8, 6, 0, tzinfo=UTC) + timedelta(minutes=minutes))
        fired += [e.logical_ts for e in rec.tick(project).executed]
    assert fired == ["2026-03-08T07:00:00.000Z"]  # 02:30 does not exist: once, at 03:00 EDT


def test_a_live_child_keeps_its_claim_in_flight_past_five_minutes(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from rocky_engine.schedule.claim_lifecycle import ChildRegistry

    project = project_at(tmp_path, transformation("up") + transformation("p", 'after = ["up"]'), MODELS)
    record_run(project, "up", "Success", T0 - timedelta(hours=1))
    submission = "ef" * 16
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(
            claim_key="p|after|x",
            pipeline="p",
            source="after",
            logical_ts=T0,
            submission_id=submission,
            now=T0,
        )
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "ROCKY_SUBMISSION_ID": submission},
    )
    try:
        ChildRegistry(project.dot_rocky).register(submission, sleeper.pid, "p", T0)
        clock = Clock(T0 + timedelta(hours=2))
        out = reconciler(clock, SimChild(clock)).tick(project)
        assert sources(out, "p") == {"after": "in_flight"}
    finally:
        sleeper.kill()
        sleeper.wait()
    # the child is gone and recorded nothing: finalized as a failure
    out = reconciler(clock, SimChild(clock)).tick(project)
    assert sources(out, "p") == {"after": "failure_backoff"}


def test_lock_override_of_a_wedged_reconciler(tmp_path: Path) -> None:
    import time

    from rocky_engine.schedule.tick_lock import TickLock

    project = project_at(tmp_path, transformation("raw", 'cron = "* * * * *"'), MODELS)
    wedged = TickLock(project.dot_rocky, heartbeat_interval=3600)
    assert wedged.acquire() == "acquired"
    try:
        clock = Clock(T0)
        fresh = reconciler(clock, SimChild(clock)).tick(project)
        assert fresh.tick_in_progress and fresh.evaluated == [] and fresh.exit_code() == 0
        rec = reconciler(clock, SimChild(clock))
        rec.wall = lambda: time.time() + 301
        out = rec.tick(project)
        assert (
            out.lock_overridden
            and not out.tick_in_progress
            and [e.pipeline for e in out.evaluated] == ["raw"]
        )
    finally:
        wedged.release()


def test_stop_starts_no_new_work(tmp_path: Path) -> None:
    project = project_at(tmp_path, cascade_body(), MODELS)
    clock = Clock(T0 + timedelta(minutes=30))
    child = SimChild(clock)
    rec = reconciler(clock, child)
    rec.tick(project)
    clock.set(T0 + timedelta(hours=1, minutes=1))
    child.on_run = lambda request: rec.request_stop()  # a SIGTERM arrives while raw runs
    out = rec.tick(project)
    assert [e.pipeline for e in out.executed] == ["raw"] and out.interrupted and out.exit_code() == 130


def test_drained_child_is_a_failure_without_incident(tmp_path: Path) -> None:
    from rocky_engine.schedule.spawner import ChildResult

    project = project_at(tmp_path, transformation("raw", 'cron = "0 * * * *"\nretry = { max = 3 }'), MODELS)
    clock = Clock(T0 + timedelta(minutes=1))

    class Drained(SimChild):
        def run(self, request, on_start=None):  # type: ignore[no-untyped-def]
            self.calls.append(request)
            return ChildResult(143, drained=True)

    child = Drained(clock)
    rec = reconciler(clock, child)
    rec.tick(project)
    clock.set(T0 + timedelta(hours=1, seconds=5))
    out = rec.tick(project)
    assert [(e.outcome, e.attempts, e.incident) for e in out.executed] == [("failure", 1, None)]
    assert len(child.calls) == 1 and not (tmp_path / ".rocky" / "incidents").exists()


def test_a_child_that_cannot_start_is_a_failure(tmp_path: Path) -> None:
    from rocky_engine.schedule.spawner import SubprocessSpawner

    project = project_at(
        tmp_path,
        transformation("p", "freshness = true") + "\n[freshness]\nexpected_lag_seconds = 60\n",
        MODELS,
    )
    clock = Clock(T0)
    rec = reconciler(clock, SimChild(clock))
    rec.spawner = SubprocessSpawner(command=[str(tmp_path / "no-such-rocky")])
    out = rec.tick(project)
    assert [(e.outcome, e.exit_code) for e in out.executed] == [("failure", 127)]
    assert out.exit_code() == 2 and out.executed[0].incident is not None


@pytest.mark.slow
def test_timeout_kill_through_the_reconciler(tmp_path: Path) -> None:
    """timeout_minutes = 1, scaled down 600x by the spawner: SIGTERM, SIGKILL after the grace, no retry."""
    import dataclasses
    import sys

    from rocky_engine.schedule.spawner import ChildRequest, ChildResult, SubprocessSpawner

    class ScaledSpawner(SubprocessSpawner):
        def run(self, request: ChildRequest, on_start: object = None) -> ChildResult:  # type: ignore[override]
            assert request.timeout_seconds == 60
            return super().run(dataclasses.replace(request, timeout_seconds=0.1), on_start)  # type: ignore[arg-type]

    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    )
    body = transformation("p", "freshness = true\ntimeout_minutes = 1\nretry = { max = 2 }")
    project = project_at(tmp_path, body + "\n[freshness]\nexpected_lag_seconds = 60\n", MODELS)
    clock = Clock(T0)
    rec = reconciler(clock, SimChild(clock))
    rec.spawner = ScaledSpawner(
        command=[sys.executable, str(stubborn)], kill_grace_seconds=0.3
    )
    out = rec.tick(project)
    [executed] = out.executed
    assert (executed.outcome, executed.exit_code, executed.timed_out, executed.attempts) == (
        "failure",
        137,
        True,
        1,
    )
    assert out.exit_code() == 2 and executed.incident is not None
    assert json.loads(Path(executed.incident).read_text())["exit_code"] == 137


def test_a_namespaced_tick_passes_its_namespace_to_the_child(tmp_path: Path) -> None:
    # With --state-path the local file is fixed, but the namespace still names the remote subtree the
    # child downloads from and uploads to: dropping it would sync a namespaced project into the default one.
    from rocky_engine.project import load_project
    from rocky_engine.schedule.spawner import child_argv
    from tests.engine.schedule.kit import write_project

    config = write_project(tmp_path, transformation("raw", 'freshness = true'), MODELS)
    (tmp_path / "rocky.toml").write_text(
        config.read_text() + "\n[freshness]\nexpected_lag_seconds = 60\n", encoding="utf-8"
    )
    project = load_project(config, env={}, state_namespace="tenant_a")
    clock = Clock(T0)
    child = SimChild(clock)
    out = reconciler(clock, child).tick(project)
    assert [e.pipeline for e in out.executed] == ["raw"]
    request = child.calls[0]
    assert request.state_namespace == "tenant_a"
    assert request.state_path == project.state_path() and request.state_path.name == "tenant_a.db"
    argv = child_argv(request, ["rocky"])
    assert argv[argv.index("--state-namespace") + 1] == "tenant_a"
    assert argv.index("--state-namespace") < argv.index("run")
