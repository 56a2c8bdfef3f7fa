"""Literals, qualified-name parsing and timestamp coercion used by every check."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from rocky_engine.adapters.dialect import ANSI
from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter
from rocky_engine.adapters.spark.dialect import SparkDialect
from rocky_engine.checks.sql import (
    as_utc,
    columns_of,
    plain_number,
    sibling,
    split_qualified,
    sql_literal,
    timestamp_literal,
)


@pytest.mark.parametrize(
    ("value", "literal"),
    [(None, "NULL"), (True, "TRUE"), (3, "3"), (2.5, "2.5"), ("it's", "'it''s'"), ("", "''")],
)
def test_sql_literal(value: Any, literal: str) -> None:
    assert sql_literal(value, ANSI) == literal


def test_sql_literal_renders_strings_by_the_dialect_given() -> None:
    # Strings take the warehouse's rule (tests/engine/adapters/test_literals.py); other values are the same.
    assert sql_literal("it's a\\b", SparkDialect()) == "'it\\'s a\\\\b'"
    assert sql_literal(2.5, SparkDialect()) == "2.5"


def test_timestamp_literal_is_utc_without_offset() -> None:
    moment = datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp_literal(moment) == "TIMESTAMP '2026-03-01 12:00:00.000000'"
    assert timestamp_literal(datetime(2026, 3, 1)) == "TIMESTAMP '2026-03-01 00:00:00.000000'"


@pytest.mark.parametrize(
    ("qualified", "parts"),
    [
        ('"wh"."shop"."orders"', ["wh", "shop", "orders"]),
        ('"s"."t"', ["s", "t"]),
        ('"a.b"."c""d"', ["a.b", 'c"d']),
        ("plain.name", ["plain", "name"]),
        ("t", ["t"]),
    ],
)
def test_split_qualified(qualified: str, parts: list[str]) -> None:
    assert split_qualified(qualified) == parts


def test_sibling_resolves_relative_to_the_checked_table() -> None:
    assert sibling('"wh"."shop"."orders"', "customers") == '"wh"."shop"."customers"'
    assert sibling('"wh"."shop"."orders"', "crm.people") == '"wh"."crm"."people"'
    assert sibling('"wh"."shop"."orders"', "other.crm.people") == '"other"."crm"."people"'
    # PostgreSQL names have no catalog: a three-part name drops it.
    assert sibling('"shop"."orders"', "db.crm.people") == '"crm"."people"'


def test_columns_of(tmp_path: Any) -> None:
    wh = DuckDbAdapter("default", tmp_path / "wh.duckdb")
    try:
        wh.execute("CREATE SCHEMA s")
        wh.execute('CREATE TABLE s."we""ird" (b INTEGER, a VARCHAR)')
        assert columns_of(wh, wh.qualified("s", 'we"ird')) == ["b", "a"]
        assert columns_of(wh, wh.qualified("s", "missing")) == []
    finally:
        wh.close()


def test_as_utc_and_plain_number() -> None:
    aware = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert as_utc(datetime(2026, 1, 1, 12)) == aware
    assert as_utc(datetime(2026, 1, 1, 14, tzinfo=timezone(timedelta(hours=2)))) == aware
    assert as_utc(date(2026, 1, 1)) == datetime(2026, 1, 1, tzinfo=UTC)
    assert as_utc("2026-01-01T12:00:00") == aware
    assert as_utc(aware.timestamp()) == aware
    assert as_utc("yesterday") is None and as_utc(None) is None
    assert plain_number(Decimal("3")) == 3 and isinstance(plain_number(Decimal("3")), int)
    assert plain_number(Decimal("2.5")) == 2.5 and plain_number("x") == "x"
