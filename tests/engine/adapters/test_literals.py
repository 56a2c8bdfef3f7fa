"""String literals per dialect (``Dialect.literal``): each warehouse reads back exactly the text rendered.

The rule differs by lexer. DuckDB and PostgreSQL (``standard_conforming_strings = on``) take a backslash
as an ordinary character, so the ANSI rule (a quote doubled) is the whole story. Spark reads backslash
escapes (measured on 4.3.0: ``'a\\b'`` is ``a`` + backspace, ``'a\\qb'`` is ``aqb``), so its rule escapes
the backslash too. The round trips run every value through a real server of each warehouse in one SELECT.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from rocky_engine.adapters.dialect import ANSI, Dialect
from rocky_engine.adapters.duckdb.dialect import DIALECT as DUCKDB
from rocky_engine.adapters.postgres.adapter import PostgresAdapter
from rocky_engine.adapters.postgres.dialect import PostgresDialect
from rocky_engine.adapters.spark.connection import SparkConnection
from rocky_engine.adapters.spark.dialect import SparkDialect
from rocky_engine.config.adapters import PostgresAdapterConfig
from tests.fixtures.postgres import PgDatabase

SPARK = SparkDialect()

# (text, ANSI literal, Spark literal)
CASES: list[tuple[str, str, str]] = [
    ("it's", "'it''s'", "'it\\'s'"),
    ("a\\b", "'a\\b'", "'a\\\\b'"),
    ("it's a\\b", "'it''s a\\b'", "'it\\'s a\\\\b'"),
    ("a\\'b", "'a\\''b'", "'a\\\\\\'b'"),
    ("\\", "'\\'", "'\\\\'"),
    ("'", "''''", "'\\''"),
    ("line1\nline2", "'line1\nline2'", "'line1\nline2'"),
    ("é ✓ 日本", "'é ✓ 日本'", "'é ✓ 日本'"),
    ("", "''", "''"),
]
IDS = ["quote", "backslash", "both", "backslash-quote", "lone-backslash", "lone-quote", "newline", "unicode",
       "empty"]
#: texts a naive rule gets wrong on Spark in other ways: escapes Spark would decode, a regex class
TRICKY = ["\\u00e9", "\\101", "^\\d+$", "a\\qb", "tab\\there", "a''b", "100%", "50% ?"]
VALUES = [text for text, _, _ in CASES] + TRICKY


@pytest.mark.parametrize("dialect", [ANSI, DUCKDB, PostgresDialect()], ids=["ansi", "duckdb", "postgres"])
@pytest.mark.parametrize(("text", "ansi", "spark"), CASES, ids=IDS)
def test_ansi_rule_doubles_quotes_and_keeps_backslashes(
    dialect: Dialect, text: str, ansi: str, spark: str
) -> None:
    assert dialect.literal(text) == ansi


@pytest.mark.parametrize(("text", "ansi", "spark"), CASES, ids=IDS)
def test_spark_rule_escapes_backslashes_then_quotes(text: str, ansi: str, spark: str) -> None:
    assert SPARK.literal(text) == spark


def _select_all(dialect: Dialect) -> str:
    return "SELECT " + ", ".join(f"{dialect.literal(v)} AS c{i}" for i, v in enumerate(VALUES))


def test_duckdb_reads_back_every_value() -> None:
    con = duckdb.connect()
    try:
        row = con.execute(_select_all(DUCKDB)).fetchone()
    finally:
        con.close()
    assert row is not None and list(row) == VALUES


@pytest.fixture
def pg(pg_db: PgDatabase) -> Iterator[PostgresAdapter]:
    server = pg_db.server
    adapter = PostgresAdapter.connect("wh", PostgresAdapterConfig.model_validate({
        "type": "postgres", "host": server.host, "port": server.port, "user": server.user,
        "password": server.password, "dbname": pg_db.name,
    }))
    try:
        yield adapter
    finally:
        adapter.close()


def test_postgres_reads_back_every_value_with_standard_conforming_strings(pg: PostgresAdapter) -> None:
    # The ANSI rule is right only while backslashes are ordinary characters: PostgreSQL's default.
    assert pg.query("SHOW standard_conforming_strings") == [("on",)]
    rows = pg.query(_select_all(pg.dialect))
    assert list(rows[0]) == VALUES


def test_spark_reads_back_every_value(spark_connection: SparkConnection) -> None:
    rows = spark_connection.main.query(_select_all(SPARK))
    assert list(rows[0]) == VALUES
