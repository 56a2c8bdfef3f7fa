"""Per-table containment: failures, fail_fast, error-rate abort, table retries, adaptive concurrency, and
the check gate of a replication run."""

from __future__ import annotations

import json
import threading

import duckdb
import pytest
from rocky_sdk import types as sdk
from rocky_sdk.types_generated import brief_schema

from rocky_engine.errors import AdapterError
from rocky_engine.run.concurrency import ConcurrencyLimit, StopRules, run_tables
from tests.engine.replication.conftest import RecordingSink, ReplicationProject
from tests.fixtures.inprocess import rocky_in_process


def _tables(rp: ReplicationProject, bad: set[int], n: int, schema: str = "src__x") -> None:
    """``n`` tables t0..t{n-1} in ``schema``; those in ``bad`` have no ts column (a permanent error)."""
    rp.sql(f"CREATE SCHEMA {schema}", *(
        f"CREATE TABLE {schema}.t{i} AS SELECT range AS id"
        + ("" if i in bad else ", TIMESTAMP '2026-01-01' + to_seconds(range) AS ts")
        + " FROM range(3)"
        for i in range(n)
    ))


def _execution(rp: ReplicationProject, body: str) -> None:
    rp.configure(sections=f"""
        [pipeline.raw.execution]
        {body}
    """)


def test_a_table_dropped_mid_run_is_contained(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1")
    rp.source_table("src__a", "first", rows=3)
    rp.source_table("src__b", "second", rows=3)
    rp.run()
    rp.append("src__a", "first", 3, 2)
    rp.append("src__b", "second", 3, 2)
    before = rp.watermark("wh.stg__b.second")
    path = str(rp.warehouse)

    def drop_second(event: str, table: str | None) -> None:
        if event == "before_materialize" and table == "wh.stg__a.first":
            # Another connection of this process drops the source the next task is about to copy.
            con = duckdb.connect(path)
            con.execute("DROP TABLE src__b.second")
            con.close()

    # The run holds the file open; a second connect in the same process shares the database instance.
    out = rp.run(events=RecordingSink(drop_second))
    assert out.status == "PartialFailure" and out.exit_code() == 2
    assert out.tables_copied == 1 and out.tables_failed == 1
    error = out.errors[0]
    assert error.asset_key == ["duckdb", "b", "second"]
    assert error.failure_kind == "not-found"
    assert "second" in error.error
    assert rp.watermark("wh.stg__b.second") == before
    assert rp.count("stg__b.second") == 3
    assert rp.watermark("wh.stg__a.first") == "2026-01-01T00:00:04"
    with rp.store() as store:
        entries = {e.key: e.status for e in store.progress.entries(out.run_id or "")}
    assert entries == {"wh.stg__a.first": "success", "wh.stg__b.second": "failed"}


def test_failures_are_contained_and_the_run_goes_on(rp: ReplicationProject) -> None:
    # The error-rate abort (default 50% after 4 tables) could stop the fifth table when both failures
    # finish first; containment alone is under test here.
    _execution(rp, "error_rate_abort_pct = 0")
    _tables(rp, bad={1, 3}, n=5)
    out = rp.run()
    assert out.status == "PartialFailure"
    assert out.tables_copied == 3 and out.tables_failed == 2
    assert out.execution.tables_processed == 5 and out.execution.tables_failed == 2
    assert sorted(e.asset_key[-1] for e in out.errors) == ["t1", "t3"]


def test_every_table_failing_is_a_failure(rp: ReplicationProject) -> None:
    _tables(rp, bad={0, 1}, n=2)
    out = rp.run()
    assert out.status == "Failure" and out.exit_code() == 1


def test_fail_fast_stops_scheduling(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\nfail_fast = true")
    _tables(rp, bad={1, 3}, n=5)
    out = rp.run()
    assert out.status == "PartialFailure"
    assert out.tables_copied == 1 and out.tables_failed == 1
    assert [(e.asset_key[-1], e.failure_kind) for e in out.errors] == [
        ("t1", "query-rejected"), ("t2", "unknown"), ("t3", "unknown"), ("t4", "unknown")
    ]
    assert out.errors[1].error == "not run: fail_fast is set and wh.stg__x.t1 failed"


def test_the_record_and_brief_name_the_tables_a_stop_rule_left_unrun(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\nfail_fast = true")
    _tables(rp, bad={1}, n=3)
    out = rp.run()
    assert (out.status, out.exit_code()) == ("PartialFailure", 2)
    with rp.store() as store:
        record = store.runs.get(out.run_id or "")
    assert record is not None
    assert [(m.model_name, m.status) for m in record.models_executed] == [
        ("wh.stg__x.t0", "success"), ("wh.stg__x.t1", "failed"), ("wh.stg__x.t2", "not_run")
    ]
    brief = json.loads(rocky_in_process(["-c", str(rp.config), "brief", "--output", "json"]).stdout)
    brief_schema.BriefOutput.model_validate(brief)
    [attention] = brief["runs"]["attention"]
    assert attention["failed_models"] == [
        {"model_name": "wh.stg__x.t1", "status": "failed"},
        {"model_name": "wh.stg__x.t2", "status": "not_run"},
    ]


def test_error_rate_abort(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\nerror_rate_abort_pct = 50")
    _tables(rp, bad={1, 3, 5}, n=8)
    out = rp.run()
    assert out.tables_copied == 2 and out.tables_failed == 2
    not_run = [e for e in out.errors if e.error.startswith("not run: ")]
    assert [e.asset_key[-1] for e in not_run] == ["t4", "t5", "t6", "t7"]
    assert not_run[0].error == "not run: 2 of 4 tables failed (50%), at or above error_rate_abort_pct = 50"


def test_error_rate_needs_four_completed_tables(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\nerror_rate_abort_pct = 50")
    _tables(rp, bad={0, 1, 2}, n=3)
    out = rp.run()
    assert out.tables_failed == 3 and not [e for e in out.errors if e.error.startswith("not run")]


def test_table_retries_reattempt_a_transient_failure(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\ntable_retries = 1")
    rp.source_table("src__a", "flaky", rows=3)
    calls = {"n": 0}

    def flaky(event: str, table: str | None) -> None:
        if event == "before_materialize" and table == "wh.stg__a.flaky":
            calls["n"] += 1
            if calls["n"] == 1:
                raise AdapterError("connection reset by peer", failure_kind="connection-failed")

    sink = RecordingSink(flaky)
    out = rp.run(events=sink)
    assert out.status == "Success"
    assert sink.count("before_materialize", "wh.stg__a.flaky") == 2


def test_a_table_retried_into_success_says_so_in_the_document_and_the_record(
    rp: ReplicationProject,
) -> None:
    _execution(rp, "concurrency = 1\ntable_retries = 2")
    rp.source_table("src__a", "flaky", rows=3)
    rp.source_table("src__a", "steady", rows=3)
    calls = {"n": 0}

    def flaky(event: str, table: str | None) -> None:
        if event == "before_materialize" and table == "wh.stg__a.flaky":
            calls["n"] += 1
            if calls["n"] <= 2:
                raise AdapterError("connection reset by peer", failure_kind="connection-failed")

    out = rp.run(events=RecordingSink(flaky))
    assert (out.status, out.exit_code()) == ("Success", 0)
    doc = out.wire()
    by_table = {m["asset_key"][-1]: m for m in doc["materializations"]}
    trail = by_table["flaky"]["attempts"]
    assert [(a["attempt"], a["outcome"], a.get("transient_kind"), a.get("backoff_ms")) for a in trail] == [
        (1, "failed", "connection-failed", 0),
        (2, "failed", "connection-failed", 0),
        (3, "success", None, None),
    ]
    assert trail[0]["error"] == "connection reset by peer" and "error" not in trail[2]
    assert "attempts" not in by_table["steady"]  # a first-try success has no trail
    assert [len(m.attempts) for m in sdk.RunResult.model_validate(doc).materializations] == [3, 0]
    with rp.store() as store:
        record = store.runs.get(out.run_id or "")
    assert record is not None
    assert {m.model_name: m.attempts for m in record.models_executed} == {
        "wh.stg__a.flaky": trail, "wh.stg__a.steady": None
    }


def test_a_table_that_runs_out_of_retries_records_every_try(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\ntable_retries = 1")
    rp.source_table("src__a", "down", rows=3)

    def always(event: str, table: str | None) -> None:
        if event == "before_materialize":
            raise AdapterError("deadlock detected", failure_kind="transient")

    out = rp.run(events=RecordingSink(always))
    assert (out.status, out.exit_code()) == ("Failure", 1)
    assert [(e.error, e.failure_kind) for e in out.errors] == [("deadlock detected", "transient")]
    with rp.store() as store:
        record = store.runs.get(out.run_id or "")
    assert record is not None
    (execution,) = record.models_executed
    assert execution.status == "failed" and execution.attempts is not None
    assert [(a["attempt"], a["outcome"], a["error"]) for a in execution.attempts] == [
        (1, "failed", "deadlock detected"), (2, "failed", "deadlock detected")
    ]


def test_table_retries_zero_means_one_attempt(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\ntable_retries = 0")
    rp.source_table("src__a", "flaky", rows=3)

    def always(event: str, table: str | None) -> None:
        if event == "before_materialize":
            raise AdapterError("deadlock detected", failure_kind="transient")

    sink = RecordingSink(always)
    out = rp.run(events=sink)
    assert out.status == "Failure"
    assert out.errors[0].failure_kind == "transient"
    assert sink.count("before_materialize") == 1


def test_permanent_errors_are_not_retried(rp: ReplicationProject) -> None:
    _execution(rp, "concurrency = 1\ntable_retries = 3")
    _tables(rp, bad={0}, n=1)
    sink = RecordingSink()
    out = rp.run(events=sink)
    assert out.errors[0].failure_kind == "query-rejected"
    assert sink.count("before_materialize") == 1


# --------------------------------------------------------------------------- the scheduler itself


def test_adaptive_limit_halves_and_grows() -> None:
    limit = ConcurrencyLimit("adaptive", tables=100)
    assert limit.limit == 4
    limit.on_pressure()
    assert limit.limit == 2
    limit.on_pressure()
    limit.on_pressure()
    assert limit.limit == 1
    for _ in range(1):
        limit.on_success()
    assert limit.limit == 2
    for _ in range(2):
        limit.on_success()
    assert limit.limit == 3
    for _ in range(1000):
        limit.on_success()
    assert limit.limit == 32 and limit.peak == 32


def test_adaptive_limit_is_capped_by_the_table_count() -> None:
    limit = ConcurrencyLimit("adaptive", tables=3)
    assert limit.limit == 3
    for _ in range(50):
        limit.on_success()
    assert limit.limit == 3 and limit.max_workers == 3


def test_fixed_limit_never_moves() -> None:
    limit = ConcurrencyLimit(2, tables=10)
    limit.on_pressure()
    limit.on_success()
    assert limit.limit == 2 and limit.max_workers == 2


def test_scheduler_backs_off_on_transient_errors() -> None:
    names = [f"t{i:02d}" for i in range(40)]
    failed_once: set[str] = set()
    lock = threading.Lock()
    in_flight = {"now": 0, "max_after_backoff": 0}
    limit = ConcurrencyLimit("adaptive", tables=len(names))

    def task(name: str, worker: int) -> int:
        with lock:
            in_flight["now"] += 1
            first = name not in failed_once and name in ("t00", "t01", "t02", "t03")
            if first:
                failed_once.add(name)
        try:
            if first:
                raise AdapterError("could not serialize access", failure_kind="transient")
            return worker
        finally:
            with lock:
                in_flight["now"] -= 1

    workers = iter(range(1000))
    run, created = run_tables(names, task, lambda: next(workers), limit, StopRules(retries=1),
                              stop=threading.Event())
    assert all(o.ok for o in run.outcomes.values()) and len(run.outcomes) == 40
    assert {n: run.outcomes[n].attempts for n in ("t00", "t01")} == {"t00": 2, "t01": 2}
    assert len(created) <= limit.peak


def test_scheduler_stop_event_leaves_the_rest_not_run() -> None:
    stop = threading.Event()

    def task(name: str, worker: int) -> int:
        if name == "b":
            stop.set()
        return 0

    run, _ = run_tables(["a", "b", "c", "d"], task, lambda: 0, ConcurrencyLimit(1, tables=4), StopRules(),
                        stop=stop)
    assert set(run.outcomes) == {"a", "b"} and run.not_run == ["c", "d"] and run.stop_reason is None


# --------------------------------------------------------------------------- checks


@pytest.mark.parametrize(
    ("severity", "fail_on_error", "status", "gate"),
    [("error", "true", "PartialFailure", True), ("warning", "true", "Success", False),
     ("error", "false", "Success", False)],
)
def test_check_gate(rp: ReplicationProject, severity: str, fail_on_error: str, status: str, gate: bool
                    ) -> None:
    rp.configure(sections=f"""
        [pipeline.raw.checks]
        row_count = true
        fail_on_error = {fail_on_error}

        [[pipeline.raw.checks.custom]]
        name = "no_big_ids"
        sql = "SELECT count(*) FROM {{target}} WHERE id > 1"
        severity = "{severity}"
    """)
    rp.source_table("src__orders", "orders", rows=5)
    out = rp.run()
    assert out.status == status
    assert out.check_gate_failed is gate
    assert out.tables_copied == 1 and not out.errors
    checks = {c["name"]: c for c in out.check_results[0].wire()["checks"]}
    assert checks["row_count"]["passed"] is True
    assert checks["no_big_ids"]["passed"] is False
    with rp.store() as store:
        assert store.checks.row_count_baseline("wh.stg__orders.orders") == [5]


def test_checks_fire_their_lifecycle_events_per_table(rp: ReplicationProject) -> None:
    rp.configure(sections="""
        [pipeline.raw.checks]
        row_count = true
    """)
    rp.source_table("src__orders", "orders", rows=3)
    rp.source_table("src__orders", "customers", rows=2)
    sink = RecordingSink()
    out = rp.run(events=sink)
    assert out.status == "Success"
    for table in ("wh.stg__orders.orders", "wh.stg__orders.customers"):
        assert [e for e, t in sink.events if t == table and "check" in e] == [
            "before_checks", "after_checks", "check_result"
        ]


def test_no_checks_configured_means_no_check_results(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=2)
    out = rp.run()
    assert out.check_results == [] and out.check_gate_failed is False


def test_an_aborting_hook_stops_scheduling(rp: ReplicationProject) -> None:
    from rocky_engine.errors import HookAbort

    _execution(rp, "concurrency = 1")
    _tables(rp, bad=set(), n=4)

    def abort_second(event: str, table: str | None) -> None:
        if event == "before_materialize" and table == "wh.stg__x.t1":
            raise HookAbort("hook `check-quota` exited 1", event="before_materialize")

    out = rp.run(events=RecordingSink(abort_second))
    assert out.status == "PartialFailure"
    assert [(e.asset_key[-1], e.failure_kind) for e in out.errors] == [
        ("t1", "unknown"), ("t2", "unknown"), ("t3", "unknown")
    ]
    assert out.errors[1].error == "not run: an on_before_materialize hook aborted the run at wh.stg__x.t1"
