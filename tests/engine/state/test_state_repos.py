"""Watermarks, run progress (resume) and check history repositories."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.state import CheckRecord, ProgressEntry, StateStore

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(tmp_path / "state.db") as s:
        yield s


# --------------------------------------------------------------------------- watermarks


def test_watermarks_set_get_all_delete(store: StateStore) -> None:
    assert store.watermarks.get("c.s.t") is None
    store.watermarks.set_many({"c.s.b": "2026-03-01T00:00:00", "c.s.a": "17"}, now=T0)
    assert store.watermarks.get("c.s.a") == "17"
    assert [(w.key, w.value, w.updated_at) for w in store.watermarks.all()] == [
        ("c.s.a", "17", T0),
        ("c.s.b", "2026-03-01T00:00:00", T0),
    ]
    store.watermarks.set_many({"c.s.a": "18"}, now=T0 + timedelta(hours=1))
    moved = {w.key: w for w in store.watermarks.all()}
    assert moved["c.s.a"].value == "18" and moved["c.s.a"].updated_at == T0 + timedelta(hours=1)
    assert moved["c.s.b"].updated_at == T0
    assert store.watermarks.delete("c.s.a")
    assert not store.watermarks.delete("c.s.a")
    assert store.watermarks.get("c.s.a") is None
    store.watermarks.set_many({})  # nothing to do


def test_watermarks_survive_reopen_and_are_visible_to_readers(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path) as writer:
        writer.watermarks.set("c.s.t", "5")
        with StateStore.open(path, writer=False) as reader:
            assert reader.watermarks.get("c.s.t") == "5"


# --------------------------------------------------------------------------- progress


def test_progress_record_and_completed_keys(store: StateStore) -> None:
    store.progress.record("run-1", "c.s.a", "success", rows=10, pipeline="orders", now=T0)
    store.progress.record("run-1", "c.s.b", "failed", error="boom", pipeline="orders", now=T0)
    store.progress.record_many(
        "run-1",
        [ProgressEntry("c.s.c", "success", rows=3), ProgressEntry("c.s.d", "skipped")],
        pipeline="orders",
        now=T0,
    )
    assert store.progress.completed_keys("run-1") == {"c.s.a", "c.s.c"}
    entries = {e.key: e for e in store.progress.entries("run-1")}
    assert entries["c.s.b"].error == "boom" and entries["c.s.b"].status == "failed"
    assert entries["c.s.a"].rows == 10 and entries["c.s.a"].finished_at == T0
    # a retry within the run overwrites the task's outcome
    store.progress.record("run-1", "c.s.b", "success", rows=4, pipeline="orders", now=T0)
    assert store.progress.completed_keys("run-1") == {"c.s.a", "c.s.b", "c.s.c"}
    assert store.progress.completed_keys("run-2") == set()
    assert store.progress.has_run("run-1") and not store.progress.has_run("run-2")


def test_latest_run_id_for_resume(store: StateStore) -> None:
    assert store.progress.latest_run_id("orders") is None
    store.progress.record("run-20260301-080000-000", "a", "success", pipeline="orders")
    store.progress.record("run-20260301-090000-000", "a", "failed", pipeline="orders")
    store.progress.record("run-20260301-100000-000", "a", "success", pipeline="other")
    store.progress.record("run-20260301-110000-000", "a", "success")
    assert store.progress.latest_run_id("orders") == "run-20260301-090000-000"
    assert store.progress.latest_run_id("other") == "run-20260301-100000-000"
    assert store.progress.latest_run_id(None) == "run-20260301-110000-000"


def test_progress_of_a_crashed_run_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = StateStore.open(path)
    store.progress.record("run-1", "c.s.a", "success", pipeline="orders")
    store.close()  # the run dies here: no run record
    with StateStore.open(path) as again:
        assert again.runs.get("run-1") is None
        assert again.progress.latest_run_id("orders") == "run-1"
        assert again.progress.completed_keys("run-1") == {"c.s.a"}


# --------------------------------------------------------------------------- check history


def test_check_history_and_row_count_baseline(store: StateStore) -> None:
    for i in range(12):
        store.checks.record_many(
            [
                CheckRecord(f"run-{i}", "c.s.orders", "row_count", True, value=100 + i),
                CheckRecord(f"run-{i}", "c.s.orders", "null_rate", True, value=0.5),
                CheckRecord(f"run-{i}", "c.s.other", "row_count", True, value=7),
            ],
            now=T0 + timedelta(hours=i),
        )
    assert store.checks.row_count_baseline("c.s.orders") == [111, 110, 109, 108, 107, 106, 105, 104, 103, 102]
    assert store.checks.row_count_baseline("c.s.orders", n=3) == [111, 110, 109]
    assert store.checks.row_count_baseline("c.s.unknown") == []
    recorded = store.checks.for_run("run-3")
    assert [(c.table_key, c.check_name, c.value) for c in recorded] == [
        ("c.s.orders", "row_count", 103),
        ("c.s.orders", "null_rate", 0.5),
        ("c.s.other", "row_count", 7),
    ]
    assert recorded[0].recorded_at == T0 + timedelta(hours=3)


def test_check_detail_and_failure_round_trip(store: StateStore) -> None:
    store.checks.record_many(
        [CheckRecord("run-1", "c.s.t", "freshness", False, value=900, severity="error",
                     detail={"lag_seconds": 900, "threshold_seconds": 600})],
        now=T0,
    )
    (check,) = store.checks.for_run("run-1")
    assert not check.passed and check.severity == "error"
    assert check.detail == {"lag_seconds": 900, "threshold_seconds": 600}
