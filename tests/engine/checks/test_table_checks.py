"""run_table_checks: each built-in check passing and failing, anomaly detection, history records."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter
from rocky_engine.checks import CheckTarget, check_records, detect_anomaly, run_table_checks
from rocky_engine.config.checks import ChecksConfig
from rocky_engine.state import CheckRecord, StateStore

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def config(**keys: Any) -> ChecksConfig:
    return ChecksConfig.model_validate(keys)


def target(wh: DuckDbAdapter, table: str = "orders", source: str | None = None,
           ts: str | None = None, **extra: Any) -> CheckTarget:
    return CheckTarget(
        asset_key=["duckdb", "shop", table],
        table_key=f"wh.shop.{table}",
        qualified=wh.qualified("shop", table),
        source_qualified=wh.qualified("shop", source) if source else None,
        source_session=None,
        timestamp_column=ts,
        **extra,
    )


def run(wh: DuckDbAdapter, checks: ChecksConfig, tgt: CheckTarget,
        baseline: Any = None) -> list[dict[str, Any]]:
    return run_table_checks(wh, checks, tgt, baseline=baseline, now=NOW).result.wire()["checks"]


@pytest.fixture
def copy(wh: DuckDbAdapter) -> DuckDbAdapter:
    """``shop.orders_copy``: a faithful copy of orders (the "target" of a replication)."""
    wh.execute("CREATE TABLE shop.orders_copy AS SELECT * FROM shop.orders")
    return wh


# ---------------------------------------------------------------------- row_count


def test_row_count_against_source(copy: DuckDbAdapter) -> None:
    checks = config(row_count=True)
    assert run(copy, checks, target(copy, "orders_copy", source="orders")) == [
        {"name": "row_count", "passed": True, "severity": "error", "source_count": 4, "target_count": 4}
    ]
    copy.execute("DELETE FROM shop.orders_copy WHERE id = 1")
    [res] = run(copy, checks, target(copy, "orders_copy", source="orders"))
    assert res["passed"] is False and res["source_count"] == 4 and res["target_count"] == 3


def test_row_count_on_a_separate_source_session(copy: DuckDbAdapter, tmp_path: Path) -> None:
    other = DuckDbAdapter("src", tmp_path / "src.duckdb")
    try:
        other.execute("CREATE SCHEMA shop")
        other.execute("CREATE TABLE shop.orders AS SELECT range AS id FROM range(7)")
        tgt = target(copy, "orders_copy")
        tgt.source_qualified = other.qualified("shop", "orders")
        tgt.source_session = other
        [res] = run(copy, config(row_count=True), tgt)
        assert (res["source_count"], res["target_count"], res["passed"]) == (7, 4, False)
    finally:
        other.close()


def test_row_count_without_source_just_counts(wh: DuckDbAdapter) -> None:
    outcome = run_table_checks(wh, config(row_count=True), target(wh), baseline=None, now=NOW)
    assert outcome.result.wire()["checks"] == [
        {"name": "row_count", "passed": True, "severity": "error", "target_count": 4}
    ]
    assert outcome.row_count == 4


def test_row_count_of_a_missing_table_fails_with_error(wh: DuckDbAdapter) -> None:
    outcome = run_table_checks(wh, config(row_count=True), target(wh, "ghost"), baseline=None, now=NOW)
    [res] = outcome.result.wire()["checks"]
    assert res["passed"] is False and "ghost" in res["error"]
    assert outcome.row_count is None and outcome.error_failed()


# ---------------------------------------------------------------------- column_match


def test_column_match(copy: DuckDbAdapter) -> None:
    checks = config(column_match=True)
    assert run(copy, checks, target(copy, "orders_copy", source="orders")) == [
        {"name": "column_match", "passed": True, "severity": "error", "missing": [], "extra": []}
    ]
    copy.execute("ALTER TABLE shop.orders_copy DROP COLUMN region")
    copy.execute("ALTER TABLE shop.orders_copy ADD COLUMN _loaded_at TIMESTAMP")
    copy.execute("ALTER TABLE shop.orders_copy ADD COLUMN junk INTEGER")
    [res] = run(copy, config(column_match={"enabled": True, "severity": "warning"}),
                target(copy, "orders_copy", source="orders", ignore_columns=["_LOADED_AT"]))
    assert res == {"name": "column_match", "passed": False, "severity": "warning", "missing": ["region"],
                   "extra": ["junk"]}


def test_column_match_needs_a_source(wh: DuckDbAdapter) -> None:
    assert run(wh, config(column_match=True), target(wh)) == []


# ---------------------------------------------------------------------- freshness


def test_freshness(wh: DuckDbAdapter) -> None:
    [res] = run(wh, config(freshness={"threshold_seconds": 7200}), target(wh, ts="created_at"))
    assert res == {"name": "freshness", "passed": True, "severity": "warning", "lag_seconds": 3600,
                   "threshold_seconds": 7200}
    strict = config(freshness={"threshold_seconds": 60, "severity": "error"})
    [res] = run(wh, strict, target(wh, ts="created_at"))
    assert res["passed"] is False and res["lag_seconds"] == 3600 and res["severity"] == "error"


def test_freshness_skipped_without_column_and_failing_on_empty_or_missing(wh: DuckDbAdapter) -> None:
    checks = config(freshness={"threshold_seconds": 60})
    assert run(wh, checks, target(wh)) == []
    wh.execute("CREATE TABLE shop.empty (ts TIMESTAMPTZ)")
    [res] = run(wh, checks, target(wh, "empty", ts="ts"))
    assert res["passed"] is False and res["error"] == "no rows" and "lag_seconds" not in res
    [res] = run(wh, checks, target(wh, ts="nope"))
    assert res["passed"] is False and "nope" in res["error"]


def test_freshness_of_timestamptz_and_date(wh: DuckDbAdapter) -> None:
    wh.execute("CREATE TABLE shop.tz (ts TIMESTAMPTZ, d DATE)")
    wh.execute("INSERT INTO shop.tz VALUES ('2026-03-01 13:00:00+02', '2026-03-01')")
    [res] = run(wh, config(freshness={"threshold_seconds": 7200}), target(wh, "tz", ts="ts"))
    assert res["lag_seconds"] == 3600
    [res] = run(wh, config(freshness={"threshold_seconds": 7200}), target(wh, "tz", ts="d"))
    assert res["lag_seconds"] == 12 * 3600 and not res["passed"]


# ---------------------------------------------------------------------- null_rate


def test_null_rate(wh: DuckDbAdapter) -> None:
    wh.execute("UPDATE shop.orders SET email = NULL WHERE id = 1")
    res = run(wh, config(null_rate={"columns": ["email", "region"], "threshold": 0.2}), target(wh))
    assert res == [
        {"name": "null_rate", "passed": False, "severity": "warning", "column": "email", "null_rate": 0.25,
         "threshold": 0.2},
        {"name": "null_rate", "passed": True, "severity": "warning", "column": "region", "null_rate": 0.0,
         "threshold": 0.2},
    ]


def test_null_rate_missing_column_fails_alone(wh: DuckDbAdapter) -> None:
    res = run(wh, config(null_rate={"columns": ["email", "ghost"], "threshold": 0.5, "severity": "error"}),
              target(wh))
    assert [r["passed"] for r in res] == [True, False]
    assert res[0]["null_rate"] == 0.0
    assert "ghost" in res[1]["error"] and res[1]["column"] == "ghost"


# ---------------------------------------------------------------------- custom


def test_custom(wh: DuckDbAdapter) -> None:
    sql = "SELECT COUNT(*) FROM {target} WHERE status = 'void'"
    [ok] = run(wh, config(custom=[{"name": "few_voids", "sql": sql, "threshold": 1}]), target(wh))
    query = 'SELECT COUNT(*) FROM "wh"."shop"."orders" WHERE status = \'void\''
    assert ok == {"name": "few_voids", "passed": True, "severity": "error", "query": query, "result_value": 1}
    [bad] = run(wh, config(custom=[{"name": "no_voids", "sql": sql}]), target(wh))
    assert bad["passed"] is False and bad["result_value"] == 1


def test_custom_errors_and_nulls(wh: DuckDbAdapter) -> None:
    res = run(wh, config(custom=[
        {"name": "broken", "sql": "SELECT nope FROM {target}"},
        {"name": "null_sum", "sql": "SELECT SUM(amount) FROM {target} WHERE id > 100"},
        {"name": "text", "sql": "SELECT 'abc'"},
    ]), target(wh))
    assert res[0]["passed"] is False and "nope" in res[0]["error"]
    assert res[1]["passed"] is True and res[1]["result_value"] is None
    assert res[2]["passed"] is False and "not a number" in res[2]["error"]


# ---------------------------------------------------------------------- orchestration


def test_disabled_checks_run_nothing(wh: DuckDbAdapter) -> None:
    checks = config(enabled=False, row_count=True, assertions=[{"table": "orders", "type": "unique",
                                                                  "column": "id"}])
    outcome = run_table_checks(wh, checks, target(wh), baseline=lambda k: [1, 1, 1], now=NOW)
    assert outcome.result.wire()["checks"] == [] and outcome.row_count is None and not outcome.error_failed()


def test_order_assertion_matching_and_gate(wh: DuckDbAdapter) -> None:
    checks = config(
        row_count=True,
        null_rate={"columns": ["email"], "threshold": 0.0},
        custom=[{"name": "c", "sql": "SELECT 0"}],
        assertions=[
            {"table": "shop.orders", "type": "unique", "column": "id"},
            {"table": "customers", "type": "not_null", "column": "name"},
            {"table": "orders", "type": "accepted_values", "column": "status", "values": ["paid"],
             "severity": "warning"},
        ],
    )
    outcome = run_table_checks(wh, checks, target(wh), baseline=None, now=NOW)
    assert [c["name"] for c in outcome.result.wire()["checks"]] == [
        "row_count", "null_rate", "c", "unique:id", "accepted_values:status"
    ]
    assert outcome.result.asset_key == ["duckdb", "shop", "orders"]
    assert [c.name for c in outcome.failed()] == ["accepted_values:status"]
    assert not outcome.error_failed()  # only a warning failed
    wh.execute("INSERT INTO shop.orders (id) VALUES (1)")
    assert run_table_checks(wh, checks, target(wh), baseline=None, now=NOW).error_failed()


# ---------------------------------------------------------------------- anomaly


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    handler = _Capture()
    logger = logging.getLogger("rocky.checks")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(tmp_path / "state.db") as s:
        yield s


def plant(store: StateStore, key: str, counts: list[int]) -> None:
    """Record ``counts`` as earlier runs' row_count values, oldest first."""
    t0 = NOW - timedelta(days=len(counts))
    store.checks.record_many([
        CheckRecord(run_id=f"run-{i}", table_key=key, check_name="row_count", passed=True, value=c,
                    severity="error", recorded_at=t0 + timedelta(days=i))
        for i, c in enumerate(counts)
    ])


def test_anomaly_with_planted_history(wh: DuckDbAdapter, store: StateStore, warnings: list[str]) -> None:
    plant(store, "wh.shop.orders", [10, 10, 10, 10])
    outcome = run_table_checks(wh, config(row_count=True), target(wh),
                               baseline=store.checks.row_count_baseline, now=NOW)
    [anomaly] = outcome.anomalies
    assert anomaly.table == "wh.shop.orders"
    assert (anomaly.current_count, anomaly.baseline_avg, anomaly.deviation_pct) == (4, 10.0, 60.0)
    assert "dropped to 4" in anomaly.reason
    assert any("row count anomaly detected" in m and "wh.shop.orders" in m for m in warnings)
    # Anomalies are advisory: the row_count check itself passes.
    assert outcome.result.wire()["checks"][0]["passed"] is True and not outcome.error_failed()


def test_anomaly_threshold_and_history_minimum(wh: DuckDbAdapter, store: StateStore,
                                               warnings: list[str]) -> None:
    plant(store, "wh.shop.orders", [6, 6, 6])
    loose = run_table_checks(wh, config(row_count=True, anomaly_threshold_pct=40), target(wh),
                             baseline=store.checks.row_count_baseline, now=NOW)
    assert loose.anomalies == []  # 33.3% <= 40%
    strict = run_table_checks(wh, config(row_count=True, anomaly_threshold_pct=30), target(wh),
                              baseline=store.checks.row_count_baseline, now=NOW)
    assert [a.deviation_pct for a in strict.anomalies] == [33.33]
    assert detect_anomaly("t", 1000, [1, 1], 50) is None  # two points are not a baseline
    assert detect_anomaly("t", 0, [0, 0, 0], 50) is None
    grew = detect_anomaly("t", 5, [0, 0, 0], 50)
    assert grew is not None and grew.deviation_pct == 500.0 and "grew to 5" in grew.reason
    # Only the newest ten runs count.
    assert detect_anomaly("t", 10, [10] * 10 + [1000] * 5, 50) is None


def test_check_records_carry_the_row_count_baseline(wh: DuckDbAdapter, store: StateStore) -> None:
    checks = config(
        row_count=True, freshness={"threshold_seconds": 60},
        assertions=[{"table": "orders", "type": "not_null", "column": "id", "name": "row_count"}],
    )
    outcome = run_table_checks(wh, checks, target(wh, ts="created_at"), baseline=None, now=NOW)
    records = check_records("run-x", "wh.shop.orders", outcome)
    assert [(r.check_name, r.passed, r.value, r.severity) for r in records] == [
        ("row_count", True, 4, "error"),
        ("freshness", False, 3600, "warning"),
        ("row_count", True, None, "error"),  # an assertion a user named row_count is not a baseline
    ]
    assert records[1].detail == {"lag_seconds": 3600, "threshold_seconds": 60}
    store.checks.record_many(records)
    assert store.checks.row_count_baseline("wh.shop.orders") == [4]
    assert records[2].detail["failing_rows"] == 0
