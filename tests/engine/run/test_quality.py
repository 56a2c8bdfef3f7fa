"""Quality pipelines end to end: the check gate, exit codes 0/1/2, schema-wide tables, check history,
anomalies across runs, and the same pipeline against a real PostgreSQL server."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import pytest

from rocky_engine.state.store import StateStore

if TYPE_CHECKING:
    from conftest import WarehouseProject

    from tests.fixtures.postgres import PgDatabase

SEED = (
    "CREATE SCHEMA shop",
    "CREATE TABLE shop.customers (id INTEGER, name VARCHAR)",
    "INSERT INTO shop.customers VALUES (1, 'ada'), (2, 'bob')",
    "CREATE TABLE shop.orders (id INTEGER, customer_id INTEGER, status VARCHAR, _fivetran_synced TIMESTAMP)",
    "INSERT INTO shop.orders SELECT range, 1 + range % 2, 'paid', TIMESTAMP '2026-03-01' FROM range(10)",
)


def quality(wp: WarehouseProject, checks: str, tables: str | None = None, extra: str = "") -> None:
    """Write a quality pipeline ``dq`` over wh.shop.orders (or ``tables``) with ``checks``."""
    tables = tables or '[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "shop"\ntable = "orders"\n'
    wp.write_config(
        '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n\n[pipeline.dq]\ntype = "quality"\n'
        + extra + "\n" + tables + "\n[pipeline.dq.checks]\n" + textwrap.dedent(checks)
    )


@pytest.fixture
def shop(wp: WarehouseProject) -> WarehouseProject:
    wp.sql(*SEED)
    return wp


def checks_of(doc: dict[str, Any], table: str) -> dict[str, dict[str, Any]]:
    [result] = [r for r in doc["check_results"] if r["asset_key"][-1] == table]
    return {c["name"]: c for c in result["checks"]}


# ---------------------------------------------------------------------- exit codes through the CLI


def test_passing_quality_run_exits_0(shop: WarehouseProject) -> None:
    quality(shop, """
        row_count = true
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "unique"
        column = "id"
    """)
    res = shop.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = res.json
    assert doc["command"] == "run" and doc["pipeline_type"] == "quality"
    assert doc["status"] == "Success" and doc["check_gate_failed"] is False
    assert doc["check_results"] == [{
        "asset_key": ["wh", "shop", "orders"],
        "checks": [
            {"name": "row_count", "passed": True, "severity": "error", "target_count": 10},
            {"name": "unique:id", "passed": True, "severity": "error", "kind": "unique", "column": "id",
             "failing_rows": 0},
        ],
    }]
    assert doc["materializations"] == [] and doc["tables_copied"] == 0
    assert doc["execution"] == {"concurrency": 1, "tables_processed": 1, "tables_failed": 0}
    [record] = shop.runs()
    assert record.status == "Success" and record.exit_code == 0 and record.pipeline_type == "quality"


def test_failed_error_check_sets_the_gate_and_exits_1(shop: WarehouseProject) -> None:
    shop.sql("INSERT INTO shop.orders (id, status) VALUES (3, 'paid'), (NULL, 'lost')")
    quality(shop, """
        [[pipeline.dq.checks.assertions]]
        table = "shop.orders"
        type = "unique"
        column = "id"

        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "accepted_values"
        column = "status"
        values = ["paid"]
        severity = "warning"
    """)
    res = shop.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 1, res.stderr
    doc = res.json
    assert doc["status"] == "Failure" and doc["check_gate_failed"] is True
    checks = checks_of(doc, "orders")
    assert checks["unique:id"]["failing_rows"] == 2 and checks["unique:id"]["passed"] is False
    assert checks["accepted_values:status"]["severity"] == "warning"
    assert "quality gate failed" in res.stderr
    [record] = shop.runs()
    assert record.status == "Failure" and record.exit_code == 1
    assert record.extra.get("check_gate_failed") is True


def test_warnings_are_advisory(shop: WarehouseProject) -> None:
    quality(shop, """
        null_rate = { columns = ["status"], threshold = 0.0 }
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "row_count_range"
        max = 5
        severity = "warning"
    """)
    shop.sql("UPDATE shop.orders SET status = NULL WHERE id = 0")
    res = shop.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = res.json
    checks = checks_of(doc, "orders")
    assert checks["null_rate"]["passed"] is False and checks["null_rate"]["severity"] == "warning"
    assert checks["row_count_range"]["passed"] is False
    assert doc["status"] == "Success" and doc["check_gate_failed"] is False


def test_fail_on_error_false_reports_without_gating(shop: WarehouseProject) -> None:
    quality(shop, """
        fail_on_error = false
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "expression"
        expression = "id < 5"
    """)
    res = shop.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = res.json
    assert doc["status"] == "Success" and doc["check_gate_failed"] is False
    assert checks_of(doc, "orders")["expression"]["failing_rows"] == 5


def test_assertion_on_a_missing_column_is_a_failed_check_not_a_crash(shop: WarehouseProject) -> None:
    quality(shop, """
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "not_null"
        column = "email"
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "not_null"
        column = "id"
    """)
    res = shop.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    checks = checks_of(res.json, "orders")
    assert checks["not_null:email"]["passed"] is False
    assert "email" in checks["not_null:email"]["error"]
    assert checks["not_null:id"]["passed"] is True
    assert res.json["check_gate_failed"] is True


# ---------------------------------------------------------------------- tables


def test_schema_wide_tables_and_assertion_matching(shop: WarehouseProject) -> None:
    quality(
        shop,
        """
        row_count = true
        [[pipeline.dq.checks.assertions]]
        table = "customers"
        type = "not_null"
        column = "name"
        """,
        tables='[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "shop"\n',
    )
    out = shop.run(pipeline="dq")
    assert out.status == "Success"
    assert [r.asset_key for r in out.check_results] == [["wh", "shop", "customers"], ["wh", "shop", "orders"]]
    assert [c.name for c in out.check_results[0].checks] == ["row_count", "not_null:name"]
    assert [c.name for c in out.check_results[1].checks] == ["row_count"]
    assert out.execution.tables_processed == 2


def test_missing_table_fails_the_gate(shop: WarehouseProject) -> None:
    tables = (
        '[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "shop"\ntable = "orders"\n'
        '[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "shop"\ntable = "ghost"\n'
        '[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "nowhere"\n'
    )
    quality(shop, "row_count = true\n", tables=tables)
    out = shop.run(pipeline="dq")
    assert out.status == "Failure" and out.check_gate_failed is True and out.exit_code() == 1
    assert [(e.asset_key, e.failure_kind, e.error) for e in out.errors] == [
        (["wh", "shop", "ghost"], "not-found", "table wh.shop.ghost does not exist"),
        (["wh", "nowhere"], "not-found", "schema wh.nowhere has no tables to check"),
    ]
    assert [r.asset_key for r in out.check_results] == [["wh", "shop", "orders"]]
    # Without the gate, a table that could not be checked is a partial failure.
    quality(shop, "row_count = true\nfail_on_error = false\n", tables=tables)
    out = shop.run(pipeline="dq")
    assert out.status == "PartialFailure" and out.exit_code() == 2 and out.check_gate_failed is False


def test_freshness_uses_the_replication_timestamp_column(shop: WarehouseProject) -> None:
    quality(
        shop,
        "freshness = { threshold_seconds = 60, severity = \"error\" }\n",
        tables='[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "shop"\n',
    )
    out = shop.run(pipeline="dq")
    customers, orders = out.check_results
    assert customers.checks == []  # no _fivetran_synced column: freshness does not apply
    [fresh] = orders.wire()["checks"]
    assert fresh["name"] == "freshness" and fresh["passed"] is False and fresh["lag_seconds"] > 60
    assert out.status == "Failure" and out.check_gate_failed


def test_freshness_reads_the_configured_timestamp_column(shop: WarehouseProject) -> None:
    shop.sql(
        "ALTER TABLE shop.customers ADD COLUMN loaded_at TIMESTAMP",
        "UPDATE shop.customers SET loaded_at = now()::TIMESTAMP",
    )
    tables = '[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "shop"\n'
    quality(shop, "freshness = { threshold_seconds = 3600, severity = \"error\" }\n", tables=tables,
            extra='timestamp_column = "loaded_at"\n')
    out = shop.run(pipeline="dq")
    customers, orders = out.check_results
    [fresh] = customers.wire()["checks"]
    assert fresh["name"] == "freshness" and fresh["passed"] is True and fresh["lag_seconds"] < 3600
    assert orders.checks == []  # no loaded_at: freshness does not apply, _fivetran_synced is not used
    assert out.status == "Success" and out.check_gate_failed is False


def test_a_timestamp_column_no_table_has_skips_freshness_with_a_warning(shop: WarehouseProject) -> None:
    quality(shop, "freshness = { threshold_seconds = 60 }\n", extra='timestamp_column = "loaded_at"\n')
    res = shop.cli("run", "--pipeline", "dq", "--output", "table")
    assert res.returncode == 0, res.stderr
    assert ("warning: freshness is configured but no checked table has the column 'loaded_at'; "
            "freshness skipped\n") in res.stderr


# ---------------------------------------------------------------------- history and anomalies


def test_check_history_and_anomaly_across_runs(shop: WarehouseProject) -> None:
    quality(shop, "row_count = true\nanomaly_threshold_pct = 30\n")
    for _ in range(3):
        out = shop.run(pipeline="dq")
        assert out.anomalies == []
    with StateStore.open(shop.state_path, writer=False) as store:
        assert store.checks.row_count_baseline("wh.shop.orders") == [10, 10, 10]
        [record] = store.checks.for_run(out.run_id or "")
        assert (record.check_name, record.passed, record.value) == ("row_count", True, 10)
    shop.sql("DELETE FROM shop.orders WHERE id >= 4")
    res = shop.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 0, res.stderr  # anomalies are advisory
    assert res.json["anomalies"] == [{
        "table": "wh.shop.orders", "current_count": 4, "baseline_avg": 10.0, "deviation_pct": 60.0,
        "reason": "row count dropped to 4 from a baseline average of 10.0 over 3 runs "
                  "(60.0% > 30% threshold)",
    }]
    assert "row count anomaly detected" in res.stderr


# ---------------------------------------------------------------------- PostgreSQL


@pytest.mark.services
def test_quality_on_postgres(wp: WarehouseProject, pg_db: PgDatabase) -> None:
    pg_db.sql(
        "CREATE SCHEMA shop; CREATE TABLE shop.orders (id INTEGER, status TEXT, email TEXT, "
        "created_at TIMESTAMP); INSERT INTO shop.orders VALUES (1, 'paid', 'a@x.io', '2026-01-01'), "
        "(2, 'paid', 'b@x.io', '2026-01-02'), (2, 'open', 'nope', '2099-01-01')"
    )
    wp.write_config(f"""
        [adapter.pg]
        type = "postgres"
        dsn = "{pg_db.conninfo}"

        [pipeline.dq]
        type = "quality"
        target = {{ adapter = "pg" }}
        [[pipeline.dq.tables]]
        catalog = "{pg_db.name}"
        schema = "shop"

        [pipeline.dq.checks]
        row_count = true
        null_rate = {{ columns = ["email"], threshold = 0.1 }}
        custom = [{{ name = "open_orders", sql = "SELECT COUNT(*) FROM {{target}} WHERE status = 'open'" }}]
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "unique"
        column = "id"
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "regex_match"
        column = "email"
        pattern = "@x\\\\.io$"
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "not_in_future"
        column = "created_at"
        [[pipeline.dq.checks.assertions]]
        table = "orders"
        type = "not_null"
        column = "missing_col"
    """)
    res = wp.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 1, res.stderr
    doc = res.json
    assert doc["check_gate_failed"] is True
    checks = checks_of(doc, "orders")
    assert checks["row_count"]["target_count"] == 3
    assert checks["null_rate"]["passed"] is True
    assert checks["open_orders"]["result_value"] == 1 and not checks["open_orders"]["passed"]
    assert checks["open_orders"]["query"].endswith('FROM "shop"."orders" WHERE status = \'open\'')
    assert checks["unique:id"]["failing_rows"] == 2
    assert checks["regex_match:email"]["failing_rows"] == 1
    assert checks["not_in_future:created_at"]["failing_rows"] == 1
    assert "missing_col" in checks["not_null:missing_col"]["error"]
    pg_db.sql("DELETE FROM shop.orders WHERE email = 'nope'")
    wp.write_config(wp.config.read_text().split("[[pipeline.dq.checks.assertions]]")[0])
    res = wp.cli("run", "--pipeline", "dq", "--output", "json")
    assert res.returncode == 0, res.stderr
