"""The webhook spool: durable producer, dedupe, and the reconciler consuming each demand at most once."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from rocky_engine.schedule.spool import (
    CONSUMED_DIR,
    SpoolError,
    list_demands,
    spool_dir_of,
    sweep_markers,
    write_demand,
)
from rocky_engine.state import StateStore
from rocky_engine.state.schedule import ScheduleRepo
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import T0, Clock, SimChild, project_at, reconciler, sources, transformation

MODELS = {"a.sql": "select 1 as x\n"}


def spool_of(root: Path) -> Path:
    return spool_dir_of(root / ".rocky")


def test_write_demand_is_durable_and_readable(tmp_path: Path) -> None:
    spool = spool_of(tmp_path)
    w = write_demand(spool, pipeline="orders", body=b'{"x":1}', delivery_id="evt-1", now=T0)
    assert w.status == "accepted" and w.demand_uid and w.path.is_file()
    assert [p.name for p in spool.iterdir()] == [w.path.name]  # no temp file left behind
    doc = json.loads(w.path.read_text())
    assert doc["pipeline"] == "orders" and doc["delivery_id"] == "evt-1" and "body" not in doc
    listing = list_demands(spool)
    assert listing.errors == []
    [demand] = listing.demands
    assert (demand.demand_uid, demand.pipeline, demand.accepted_at) == (w.demand_uid, "orders", T0)
    assert demand.entry().body_sha256 == doc["body_sha256"]


def test_delivery_id_dedupes_while_queued_and_24h_after_consumption(tmp_path: Path) -> None:
    from rocky_engine.schedule.spool import consume

    spool = spool_of(tmp_path)
    first = write_demand(spool, pipeline="orders", body=b"a", delivery_id="evt-1", now=T0)
    assert (
        write_demand(spool, pipeline="orders", body=b"b", delivery_id="evt-1", now=T0).status == "duplicate"
    )
    # the same id for another pipeline is another demand
    assert write_demand(spool, pipeline="other", body=b"a", delivery_id="evt-1", now=T0).status == "accepted"
    [demand] = [d for d in list_demands(spool).demands if d.pipeline == "orders"]
    consume(spool, demand, T0)
    assert not first.path.exists()
    later = T0 + timedelta(hours=23, minutes=59)
    assert (
        write_demand(spool, pipeline="orders", body=b"a", delivery_id="evt-1", now=later).status
        == "duplicate"
    )
    after_ttl = T0 + timedelta(hours=24, seconds=1)
    assert sweep_markers(spool, after_ttl) == 1
    assert (
        write_demand(spool, pipeline="orders", body=b"a", delivery_id="evt-1", now=after_ttl).status
        == "accepted"
    )


def test_body_hash_dedupes_only_while_queued(tmp_path: Path) -> None:
    from rocky_engine.schedule.spool import consume

    spool = spool_of(tmp_path)
    assert write_demand(spool, pipeline="orders", body=b"same", delivery_id=None, now=T0).status == "accepted"
    assert (
        write_demand(spool, pipeline="orders", body=b"same", delivery_id=None, now=T0).status == "duplicate"
    )
    [demand] = list_demands(spool).demands
    consume(spool, demand, T0)
    assert not (spool / CONSUMED_DIR).exists()
    assert write_demand(spool, pipeline="orders", body=b"same", delivery_id=None, now=T0).status == "accepted"


def test_missing_spool_is_empty_and_unreadable_spool_is_an_error(tmp_path: Path) -> None:
    spool = spool_of(tmp_path)
    assert list_demands(spool).demands == [] and list_demands(spool).errors == []
    spool.parent.mkdir(parents=True)
    spool.symlink_to(tmp_path / "nowhere")
    listing = list_demands(spool)
    assert listing.demands == [] and listing.errors == [
        f"webhook spool {spool} is a dangling symlink; cannot tell whether demands are waiting"
    ]
    with pytest.raises(SpoolError, match="cannot write to the webhook spool"):
        write_demand(spool, pipeline="orders", body=b"", delivery_id=None, now=T0)


def test_an_unreadable_demand_file_is_an_error_not_skipped_silently(tmp_path: Path) -> None:
    spool = spool_of(tmp_path)
    write_demand(spool, pipeline="orders", body=b"", delivery_id=None, now=T0)
    (spool / "b-broken.json").write_text("{not json")
    (spool / "d-link.json").symlink_to(tmp_path / "gone.json")
    listing = list_demands(spool)
    assert len(listing.demands) == 1
    assert len(listing.errors) == 2 and all("cannot read webhook demand" in e for e in listing.errors)


# ---------------------------------------------------------------------- consumption by the reconciler


def test_tick_runs_each_webhook_demand_once_with_trigger_webhook(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("orders"), MODELS)
    clock = Clock(T0)
    child = SimChild(clock)
    rec = reconciler(clock, child)
    w = write_demand(spool_of(tmp_path), pipeline="orders", body=b"", delivery_id="evt-9", now=T0)
    out = rec.tick(project)
    assert [(e.pipeline, e.source, e.outcome) for e in out.executed] == [("orders", "webhook", "success")]
    assert child.calls[0].trigger == "webhook"
    assert sources(out, "orders") == {"webhook": "due"}
    assert list_demands(spool_of(tmp_path)).demands == []
    clock.advance(minutes=1)
    assert rec.tick(project).executed == []  # consumed: at most once
    with StateStore.open(project.state_path(), writer=False) as store:
        claim = ClaimRepo(store).get(f"webhook|{w.demand_uid}")
        assert claim is not None and (claim.state, claim.outcome) == ("completed", "success")
        record = store.runs.by_submission_id(claim.submission_id)
        assert record is not None and record.trigger == "Webhook"


def test_demand_already_claimed_is_not_run_again(tmp_path: Path) -> None:
    """Crash between the claim commit and the spool unlink: the next tick drops the file, runs nothing."""
    project = project_at(tmp_path, transformation("orders"), MODELS)
    w = write_demand(spool_of(tmp_path), pipeline="orders", body=b"", delivery_id=None, now=T0)
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(
            claim_key=f"webhook|{w.demand_uid}",
            pipeline="orders",
            source="webhook",
            logical_ts=T0,
            submission_id="cd" * 16,
            now=T0,
        )
    clock = Clock(T0 + timedelta(minutes=6))
    child = SimChild(clock)
    out = reconciler(clock, child).tick(project)
    assert child.calls == [] and not w.path.exists()
    assert sources(out, "orders") == {"webhook": "dedup"}
    with StateStore.open(project.state_path(), writer=False) as store:
        claim = ClaimRepo(store).get(f"webhook|{w.demand_uid}")
        # the stuck-claim resolver finalized the claimed-but-never-run demand as a failure (loss window)
        assert claim is not None and (claim.state, claim.outcome) == ("completed", "failure")


def test_demand_for_removed_pipeline_is_finalized_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = project_at(tmp_path, transformation("orders"), MODELS)
    w = write_demand(spool_of(tmp_path), pipeline="legacy", body=b"", delivery_id="evt-7", now=T0)
    clock = Clock(T0)
    child = SimChild(clock)
    out = reconciler(clock, child).tick(project)
    assert child.calls == [] and not w.path.exists()
    assert [(s.pipeline, s.source, s.reason) for s in out.skipped] == [("legacy", "webhook", "config_error")]
    assert out.exit_code() == 0
    assert any(
        r.levelname == "ERROR"
        and "names pipeline 'legacy', which is no longer in the config" in r.getMessage()
        for r in caplog.records
    )
    with StateStore.open(project.state_path(), writer=False) as store:
        claim = ClaimRepo(store).get(f"webhook|{w.demand_uid}")
        assert claim is not None and claim.state == "released" and claim.attempts == 0


def test_paused_pipeline_defers_its_demands(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("orders"), MODELS)
    write_demand(spool_of(tmp_path), pipeline="orders", body=b"", delivery_id=None, now=T0)
    with StateStore.open(project.state_path()) as store:
        ScheduleRepo(store).set_paused("orders", True, T0)
    clock = Clock(T0)
    child = SimChild(clock)
    rec = reconciler(clock, child)
    out = rec.tick(project)
    assert child.calls == [] and sources(out, "orders") == {"webhook": "paused"}
    assert len(list_demands(spool_of(tmp_path)).demands) == 1
    with StateStore.open(project.state_path()) as store:
        ScheduleRepo(store).set_paused("orders", False, T0)
    clock.advance(minutes=1)
    assert [e.source for e in rec.tick(project).executed] == ["webhook"]


def test_unreadable_spool_exits_1_even_when_runs_succeed(tmp_path: Path) -> None:
    project = project_at(
        tmp_path,
        transformation("raw", "freshness = true") + "\n[freshness]\nexpected_lag_seconds = 60\n",
        MODELS,
    )
    spool = spool_of(tmp_path)
    spool.parent.mkdir(parents=True)
    spool.symlink_to(tmp_path / "nowhere")
    clock = Clock(T0)
    out = reconciler(clock, SimChild(clock)).tick(project)
    assert [e.outcome for e in out.executed] == ["success"]
    assert out.exit_code() == 1 and "dangling symlink" in out.errors[0]
    assert out.wire()["errors"] == out.errors


def test_spool_unreadable_by_permissions(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads through permission bits; the dangling-symlink test covers unreadable spools")
    spool = spool_of(tmp_path)
    write_demand(spool, pipeline="orders", body=b"", delivery_id=None, now=T0)
    spool.chmod(0)
    try:
        assert "Permission denied" in list_demands(spool).errors[0]
    finally:
        spool.chmod(0o755)
