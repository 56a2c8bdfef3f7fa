"""Run records: insert, listing filters, lookups the scheduler relies on, run id minting."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from rocky_engine.errors import StateError
from rocky_engine.state import ModelExecution, RunRecord, StateStore, format_run_id, trigger_from_env

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(tmp_path / "state.db") as s:
        yield s


def _run(run_id: str, start: datetime, *, pipeline: str = "orders", status: str = "Success",
         models: tuple[str, ...] = (), submission_id: str | None = None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        pipeline=pipeline,
        started_at=start,
        finished_at=start + timedelta(seconds=30),
        status=status,
        submission_id=submission_id,
        models_executed=[
            ModelExecution(model_name=m, started_at=start, finished_at=start + timedelta(seconds=1),
                           duration_ms=1000, rows_affected=10, status="success")
            for m in models
        ],
    )


def test_insert_and_get_round_trips_every_field(store: StateStore) -> None:
    record = RunRecord(
        run_id="run-20260301-080000-000",
        pipeline="orders",
        pipeline_type="replication",
        started_at=T0,
        finished_at=T0 + timedelta(seconds=2),
        status="PartialFailure",
        trigger="Schedule",
        submission_id="sub-1",
        models_executed=[ModelExecution(model_name="a", started_at=T0, duration_ms=5, rows_affected=3,
                                        status="failed")],
        config_hash="abc123",
        triggering_identity="alice",
        hostname="host-1",
        idempotency_key="key-1",
        exit_code=2,
        interrupted=True,
        duration_ms=2000,
        extra={"resumed_from": "run-x", "tables_skipped": 3},
    )
    store.runs.insert(record)
    assert store.runs.get(record.run_id) == record
    assert store.runs.get("run-nope") is None


def test_datetimes_are_normalised_to_utc(store: StateStore) -> None:
    paris = timezone(timedelta(hours=1))
    store.runs.insert(_run("run-a", datetime(2026, 3, 1, 9, 0, tzinfo=paris)))
    got = store.runs.get("run-a")
    assert got is not None
    assert got.started_at == T0 and got.started_at.tzinfo == UTC
    naive = RunRecord(run_id="run-b", started_at=datetime(2026, 3, 1, 8, 0), status="Success")
    assert naive.started_at == T0


def test_duplicate_run_id_is_a_state_error(store: StateStore) -> None:
    store.runs.insert(_run("run-a", T0))
    with pytest.raises(StateError, match="a run with this run_id is already recorded"):
        store.runs.insert(_run("run-a", T0))
    assert len(store.runs.list()) == 1


def test_insert_many_is_one_transaction(store: StateStore) -> None:
    with pytest.raises(StateError):
        store.runs.insert_many([_run("run-a", T0), _run("run-b", T0), _run("run-a", T0)])
    assert store.runs.list() == []


def test_list_is_newest_first_and_limited(store: StateStore) -> None:
    store.runs.insert_many([_run(f"run-{i:02d}", T0 + timedelta(hours=i)) for i in range(60)])
    runs = store.runs.list()
    assert len(runs) == 50
    assert [r.run_id for r in runs[:3]] == ["run-59", "run-58", "run-57"]
    assert runs[-1].run_id == "run-10"
    assert len(store.runs.list(limit=5)) == 5
    assert len(store.runs.list(limit=None)) == 60


def test_list_since_is_inclusive(store: StateStore) -> None:
    store.runs.insert_many([_run(f"run-{i}", T0 + timedelta(days=i)) for i in range(5)])
    runs = store.runs.list(since=T0 + timedelta(days=3))
    assert [r.run_id for r in runs] == ["run-4", "run-3"]
    assert store.runs.list(since=T0 + timedelta(days=10)) == []


def test_list_model_filter(store: StateStore) -> None:
    store.runs.insert_many([
        _run("run-1", T0, models=("stg_orders", "fct_revenue")),
        _run("run-2", T0 + timedelta(hours=1), models=("stg_orders",)),
        _run("run-3", T0 + timedelta(hours=2), models=("fct_revenue_daily",)),
        _run("run-4", T0 + timedelta(hours=3)),
    ])
    assert [r.run_id for r in store.runs.list(model="fct_revenue")] == ["run-1"]
    assert [r.run_id for r in store.runs.list(model="stg_orders")] == ["run-2", "run-1"]
    assert store.runs.list(model="missing") == []
    recent = store.runs.list(model="stg_orders", since=T0 + timedelta(minutes=1))
    assert [r.run_id for r in recent] == ["run-2"]


def test_latest_by_pipeline_and_status(store: StateStore) -> None:
    store.runs.insert_many([
        _run("run-1", T0, status="Success"),
        _run("run-2", T0 + timedelta(hours=1), status="Failure"),
        _run("run-3", T0 + timedelta(hours=2), pipeline="other", status="Success"),
    ])
    latest = store.runs.latest("orders")
    assert latest is not None and latest.run_id == "run-2"
    success = store.runs.latest("orders", "Success")
    assert success is not None and success.run_id == "run-1"
    assert store.runs.latest("orders", "PartialFailure") is None
    assert store.runs.latest("nobody") is None


def test_by_submission_id(store: StateStore) -> None:
    store.runs.insert_many([
        _run("run-1", T0, submission_id="sub-a"),
        _run("run-2", T0 + timedelta(hours=1), submission_id="sub-b"),
    ])
    found = store.runs.by_submission_id("sub-b")
    assert found is not None and found.run_id == "run-2"
    assert store.runs.by_submission_id("sub-zzz") is None


@pytest.mark.slow
def test_latest_success_among_100k_runs(store: StateStore) -> None:
    statuses = ("Success", "Failure", "PartialFailure")
    records = [
        RunRecord(
            run_id=f"run-{i:06d}",
            pipeline=f"p{i % 20}",
            started_at=T0 + timedelta(minutes=i),
            finished_at=T0 + timedelta(minutes=i, seconds=30),
            status=statuses[i % 3],
        )
        for i in range(100_000)
    ]
    with store.transaction():
        store.runs.insert_many(records)
    candidates = [r for r in records if r.pipeline == "p7" and r.status == "Success"]
    expected = max(candidates, key=lambda r: r.finished_at or T0)
    found = store.runs.latest("p7", "Success")
    assert found is not None and found.run_id == expected.run_id
    plan = " ".join(
        str(row[3])
        for row in store.query(
            "EXPLAIN QUERY PLAN SELECT run_id FROM run_history WHERE pipeline = ? AND status = ? "
            "ORDER BY finished_at DESC LIMIT 1",
            ("p7", "Success"),
        )
    )
    assert "USING INDEX run_history_pipeline_status" in plan
    assert "TEMP B-TREE" not in plan
    assert len(store.runs.list()) == 50


# --------------------------------------------------------------------------- run ids


def test_format_run_id() -> None:
    assert format_run_id(datetime(2026, 3, 1, 8, 5, 9, 123999, tzinfo=UTC)) == "run-20260301-080509-123"
    eastern = timezone(timedelta(hours=-5))
    assert format_run_id(datetime(2026, 3, 1, 3, 5, 9, 7000, tzinfo=eastern)) == "run-20260301-080509-007"


def test_new_run_id_is_unique(store: StateStore) -> None:
    now = datetime(2026, 3, 1, 8, 5, 9, 123456, tzinfo=UTC)
    first = store.runs.new_run_id(now)
    assert first == "run-20260301-080509-123"
    # handed out but not yet recorded: still taken for this process
    assert store.runs.new_run_id(now) == "run-20260301-080509-124"


def test_new_run_id_skips_recorded_and_in_progress_ids(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    now = datetime(2026, 3, 1, 8, 5, 9, 500000, tzinfo=UTC)
    with StateStore.open(path) as store:
        store.runs.insert(_run("run-20260301-080509-500", now))
        store.progress.record("run-20260301-080509-501", "a.b.c", "success", pipeline="orders")
    with StateStore.open(path) as store:  # a new process: knows only what is stored
        assert store.runs.new_run_id(now) == "run-20260301-080509-502"


def test_new_run_id_rolls_over_into_the_next_second(store: StateStore) -> None:
    now = datetime(2026, 3, 1, 8, 5, 59, 999000, tzinfo=UTC)
    store.runs.insert(_run(format_run_id(now), now))
    assert store.runs.new_run_id(now) == "run-20260301-080600-000"


def test_trigger_from_env() -> None:
    assert trigger_from_env({}) == "Manual"
    assert trigger_from_env({"ROCKY_RUN_TRIGGER": ""}) == "Manual"
    assert trigger_from_env({"ROCKY_RUN_TRIGGER": "schedule"}) == "Schedule"
    assert trigger_from_env({"ROCKY_RUN_TRIGGER": "webhook"}) == "Webhook"
    assert trigger_from_env({"ROCKY_RUN_TRIGGER": "SENSOR"}) == "Sensor"
    assert trigger_from_env({"ROCKY_RUN_TRIGGER": "ci"}) == "Ci"
    assert trigger_from_env({"ROCKY_RUN_TRIGGER": "backfill"}) == "Backfill"
