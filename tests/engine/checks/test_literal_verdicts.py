"""Assertions whose values hold quotes and backslashes give the right verdict on DuckDB and on Spark.

A value is compared as the warehouse reads its literal, so a literal rendered by the wrong rule compares
against other text: on Spark, ``'it''s a\\b'`` (the ANSI rule) reads ``it's a`` + backspace, and the regex
``'^\\d{3}$'`` reads ``^d{3}$``. Each case checks rows with exactly the configured text (must pass: a
wrong rule fails them) and then rows holding what a wrong rule would read instead (must fail: a wrong rule
passes them). The rows are built with ``chr()`` so their text never depends on the rule under test.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.adapters.base import WarehouseAdapter
from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter
from rocky_engine.adapters.spark.adapter import SparkAdapter
from rocky_engine.adapters.spark.options import SparkConnectOptions
from rocky_engine.checks.assertions import run_assertion
from rocky_engine.config.checks import Assertion
from tests.fixtures.spark_server import SparkServer

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
QUOTE, BACKSLASH, BACKSPACE = "chr(39)", "chr(92)", "chr(8)"
#: the text ``it's a\b`` (quote and backslash), and the text ANSI doubling makes of it on Spark
EXACT = f"concat('it', {QUOTE}, 's a', {BACKSLASH}, 'b')"
MANGLED = f"concat('it', {QUOTE}, 's a', {BACKSPACE})"


@pytest.fixture(params=["duckdb", pytest.param("spark", marks=pytest.mark.spark)])
def warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[WarehouseAdapter, str]]:
    """A warehouse adapter (its own dialect, as a run passes it) and a schema to create tables in."""
    if request.param == "duckdb":
        duck = DuckDbAdapter("wh", tmp_path / "wh.duckdb")
        duck.execute("CREATE SCHEMA shop")
        try:
            yield duck, "shop"
        finally:
            duck.close()
        return
    server: SparkServer = request.getfixturevalue("spark_server")
    schema: str = request.getfixturevalue("spark_schema")
    options = SparkConnectOptions(remote=server.url, adapter="lake")
    spark = SparkAdapter.connect("lake", options, "spark_catalog")
    try:
        yield spark, schema
    finally:
        spark.close()


def _table(wh: WarehouseAdapter, schema: str, name: str, *texts: str) -> str:
    """A one-column relation ``s`` with one row per SQL text expression; its qualified name. A view: on
    Spark it writes no files, so the test costs a few catalog operations."""
    qualified = wh.qualified(schema, name)
    rows = " UNION ALL ".join(f"SELECT {text} AS s" for text in texts)
    wh.execute(f"CREATE VIEW {qualified} AS {rows}")
    return qualified


def _check(wh: WarehouseAdapter, qualified: str, **keys: Any) -> dict[str, Any]:
    assertion = Assertion.model_validate({"table": "t", "column": "s", **keys})
    return run_assertion(wh, assertion, qualified, NOW, wh.dialect).wire()


def test_accepted_values_with_a_quote_and_a_backslash(warehouse: tuple[WarehouseAdapter, str]) -> None:
    wh, schema = warehouse
    keys = {"type": "accepted_values", "values": ["it's a\\b", "plain"]}
    exact = _check(wh, _table(wh, schema, "exact", EXACT, "'plain'"), **keys)
    assert exact["passed"] is True and exact["failing_rows"] == 0, exact
    # alone in its table: a wrong rule that reads the value as this text passes it (a wrong pass)
    mangled = _check(wh, _table(wh, schema, "mangled", MANGLED, "'plain'"), **keys)
    assert mangled["passed"] is False and mangled["failing_rows"] == 1, mangled
    assert "error" not in mangled


def test_regex_match_with_a_backslash_class(warehouse: tuple[WarehouseAdapter, str]) -> None:
    wh, schema = warehouse
    keys = {"type": "regex_match", "pattern": "^\\d{3}$"}
    digits = _check(wh, _table(wh, schema, "digits", "'123'", "'456'"), **keys)
    assert digits["passed"] is True and digits["failing_rows"] == 0, digits
    letters = _check(wh, _table(wh, schema, "letters", "'ddd'"), **keys)
    assert letters["passed"] is False and letters["failing_rows"] == 1, letters
