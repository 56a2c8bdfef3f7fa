"""Every assertion type passing and failing on a real DuckDB table, filters, severities, bad input."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter
from rocky_engine.checks.assertions import assertion_applies, assertion_sql, run_assertion, run_assertions
from rocky_engine.config.checks import Assertion

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def make(**keys: Any) -> Assertion:
    return Assertion.model_validate({"table": "orders", **keys})


def check(wh: DuckDbAdapter, **keys: Any) -> dict[str, Any]:
    return run_assertion(wh, make(**keys), wh.qualified("shop", "orders"), NOW).wire()


# (assertion keys, SQL that breaks it, failing rows after the break)
CASES: list[tuple[dict[str, Any], str, int]] = [
    ({"type": "not_null", "column": "email"}, "UPDATE shop.orders SET email = NULL WHERE id IN (1, 2)", 2),
    ({"type": "unique", "column": "id"}, "INSERT INTO shop.orders (id) VALUES (1), (NULL), (NULL)", 2),
    (
        {"type": "accepted_values", "column": "status", "values": ["paid", "open", "void"]},
        "UPDATE shop.orders SET status = 'lost' WHERE id = 3",
        1,
    ),
    (
        {"type": "relationships", "column": "customer_id", "to_table": "customers", "to_column": "id"},
        "UPDATE shop.orders SET customer_id = 99 WHERE id = 4",
        1,
    ),
    ({"type": "expression", "expression": "amount >= 0"}, "UPDATE shop.orders SET amount = -1 WHERE id = 2",
     1),
    ({"type": "in_range", "column": "amount", "min": 0, "max": 100}, "UPDATE shop.orders SET amount = 500",
     4),
    (
        {"type": "regex_match", "column": "email", "pattern": "^[a-z]+@x\\.io$"},
        "UPDATE shop.orders SET email = 'nobody' WHERE id = 1",
        1,
    ),
    (
        {"type": "composite", "columns": ["customer_id", "region"]},
        "UPDATE shop.orders SET region = 'eu' WHERE id = 4",
        2,
    ),
    (
        {"type": "not_in_future", "column": "created_at"},
        "UPDATE shop.orders SET created_at = TIMESTAMP '2026-03-01 12:30:00' WHERE id = 1",
        1,
    ),
    (
        {"type": "older_than_n_days", "column": "created_at", "days": 90},
        "UPDATE shop.orders SET created_at = TIMESTAMP '2025-11-01' WHERE id = 4",
        1,
    ),
]


@pytest.mark.parametrize(("keys", "breaker", "failing"), CASES, ids=[c[0]["type"] for c in CASES])
def test_row_assertion_passes_then_fails(
    wh: DuckDbAdapter, keys: dict[str, Any], breaker: str, failing: int
) -> None:
    ok = check(wh, **keys)
    assert ok["passed"] is True, ok
    assert ok["failing_rows"] == 0
    assert ok["kind"] == keys["type"]
    assert ok["severity"] == "error"
    wh.execute(breaker)
    bad = check(wh, **keys)
    assert bad["passed"] is False
    assert bad["failing_rows"] == failing
    assert "error" not in bad


def test_default_names_and_detail_shape(wh: DuckDbAdapter) -> None:
    assert check(wh, type="not_null", column="id") == {
        "name": "not_null:id", "passed": True, "severity": "error", "kind": "not_null", "column": "id",
        "failing_rows": 0,
    }
    composite = check(wh, type="composite", columns=["id", "region"])
    assert composite["name"] == "composite" and composite["columns"] == ["id", "region"]
    assert "column" not in composite
    assert check(wh, type="unique", column="id", name="pk_unique")["name"] == "pk_unique"


def test_row_count_range(wh: DuckDbAdapter) -> None:
    ok = check(wh, type="row_count_range", min=1, max=4)
    assert ok["passed"] and ok["failing_rows"] == 0 and ok["row_count"] == 4
    assert ok["min"] == 1 and ok["max"] == 4
    too_many = check(wh, type="row_count_range", max=3)
    assert not too_many["passed"] and too_many["failing_rows"] == 1 and "min" not in too_many
    assert not check(wh, type="row_count_range", min=5)["passed"]


def test_aggregate(wh: DuckDbAdapter) -> None:
    ok = check(wh, type="aggregate", op="sum", column="amount", cmp="=", value=100)
    assert ok["passed"] and ok["actual"] == 100 and ok["op"] == "sum"
    assert check(wh, type="aggregate", op="count", cmp="gte", value=4)["passed"]
    assert check(wh, type="aggregate", op="max", column="amount", cmp="<", value=50)["passed"]
    bad = check(wh, type="aggregate", op="avg", column="amount", cmp=">", value=30)
    assert not bad["passed"] and bad["failing_rows"] == 1 and bad["actual"] == 25
    # An aggregate over no rows proves nothing.
    empty = check(wh, type="aggregate", op="sum", column="amount", cmp=">=", value=0, filter="id > 100")
    assert not empty["passed"] and empty["actual"] is None


def test_filter_restricts_rows_first(wh: DuckDbAdapter) -> None:
    wh.execute("UPDATE shop.orders SET email = NULL WHERE status = 'void'")
    assert not check(wh, type="not_null", column="email")["passed"]
    filtered = check(wh, type="not_null", column="email", filter="status <> 'void'")
    assert filtered["passed"] and filtered["filter"] == "status <> 'void'"
    assert check(wh, type="row_count_range", min=2, max=2, filter="region = 'eu'")["passed"]
    assert check(wh, type="unique", column="customer_id", filter="status = 'paid'")["passed"]
    assert not check(wh, type="unique", column="customer_id")["passed"]


def test_warning_severity_is_reported(wh: DuckDbAdapter) -> None:
    res = check(wh, type="accepted_values", column="status", values=["paid"], severity="warning")
    assert res["passed"] is False and res["severity"] == "warning" and res["failing_rows"] == 2


def test_missing_column_fails_with_the_warehouse_message(wh: DuckDbAdapter) -> None:
    res = check(wh, type="not_null", column="nope")
    assert res["passed"] is False
    assert "failing_rows" not in res
    assert "nope" in res["error"] and "Binder Error" in res["error"]


def test_bad_expression_and_missing_parent_are_contained(wh: DuckDbAdapter) -> None:
    checks = run_assertions(
        wh,
        [
            make(type="expression", expression="amount >>> 1"),
            make(type="relationships", column="customer_id", to_table="ghosts", to_column="id"),
            make(type="not_null", column="id"),
        ],
        wh.qualified("shop", "orders"),
        NOW,
    )
    results = [c.wire() for c in checks]
    assert [r["passed"] for r in results] == [False, False, True]
    assert "error" in results[0]
    assert "ghosts" in results[1]["error"]


def test_relationships_to_another_schema(wh: DuckDbAdapter) -> None:
    wh.execute("CREATE SCHEMA crm")
    wh.execute("CREATE TABLE crm.people AS SELECT id FROM shop.customers WHERE id < 3")
    res = check(wh, type="relationships", column="customer_id", to_table="crm.people", to_column="id")
    assert not res["passed"] and res["failing_rows"] == 1
    three_part = check(wh, type="relationships", column="customer_id", to_table="wh.shop.customers",
                       to_column="id")
    assert three_part["passed"]


def test_string_literals_are_escaped(wh: DuckDbAdapter) -> None:
    wh.execute("UPDATE shop.orders SET status = 'it''s' WHERE id = 1")
    res = check(wh, type="accepted_values", column="status", values=["it's", "paid", "open", "void"])
    assert res["passed"], res


def test_assertion_sql_is_one_statement() -> None:
    sql = assertion_sql(make(type="not_null", column="x", filter="y = 1"), '"wh"."s"."t"', NOW)
    assert sql == 'SELECT COUNT(*) FROM "wh"."s"."t" WHERE (y = 1) AND ("x" IS NULL)'
    sql = assertion_sql(make(type="not_in_future", column="ts"), '"s"."t"', NOW)
    assert "TIMESTAMP '2026-03-01 12:00:00.000000'" in sql


@pytest.mark.parametrize(
    ("name", "matches"),
    [("orders", True), ("shop.orders", True), ("wh.shop.orders", True), ("other.orders", False),
     ("customers", False), ("x.wh.shop.orders", False)],
)
def test_assertion_applies(name: str, matches: bool) -> None:
    assert assertion_applies(name, ["wh", "shop", "orders"]) is matches
