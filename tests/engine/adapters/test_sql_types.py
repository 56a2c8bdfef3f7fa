"""Column types: the canonical form every dialect reads into, rendering per dialect, safe widenings, and
the type a copied column gets in another warehouse."""

from __future__ import annotations

import pytest

from rocky_engine.adapters.duckdb.dialect import DIALECT as DUCKDB
from rocky_engine.adapters.postgres.dialect import DIALECT as POSTGRES
from rocky_engine.adapters.sql_types import SqlType, is_widening, parse_type


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INTEGER", SqlType("int", 32)),
        ("int4", SqlType("int", 32)),
        ("bigint", SqlType("int", 64)),
        ("HUGEINT", SqlType("int", 128)),
        ("DECIMAL(10,2)", SqlType("decimal", 10, 2)),
        ("numeric(12, 3)", SqlType("decimal", 12, 3)),
        ("numeric", SqlType("decimal")),
        ("character varying(20)", SqlType("string", 20)),
        ("VARCHAR", SqlType("string")),
        ("text", SqlType("string")),
        ("timestamp without time zone", SqlType("timestamp")),
        ("timestamp(3) without time zone", SqlType("timestamp")),
        ("TIMESTAMP WITH TIME ZONE", SqlType("timestamptz")),
        ("double precision", SqlType("float", 64)),
        ("FLOAT", SqlType("float", 32)),
        ("jsonb", SqlType("json")),
        ("INTEGER[]", SqlType("other", raw="INTEGER[]")),
    ],
)
def test_parse_type(text: str, expected: SqlType) -> None:
    assert parse_type(text) == expected


def test_render_per_dialect() -> None:
    assert DUCKDB.render_type(SqlType("decimal", 10, 2)) == "DECIMAL(10,2)"
    assert POSTGRES.render_type(SqlType("decimal", 10, 2)) == "numeric(10,2)"
    assert POSTGRES.render_type(SqlType("string", 20)) == "varchar(20)"
    assert DUCKDB.render_type(SqlType("string", 20)) == "VARCHAR"
    assert DUCKDB.render_type(SqlType("decimal")) == "DOUBLE"
    assert POSTGRES.render_type(SqlType("int", 128)) == "numeric(38,0)"
    assert POSTGRES.render_type(SqlType("json")) == "jsonb"
    assert DUCKDB.render_type(SqlType("other", raw="INTEGER[]")) == "INTEGER[]"


@pytest.mark.parametrize(
    ("old", "new", "widening"),
    [
        ("INTEGER", "BIGINT", True),
        ("SMALLINT", "INTEGER", True),
        ("FLOAT", "DOUBLE", True),
        ("varchar(10)", "varchar(20)", True),
        ("varchar(10)", "text", True),
        ("DECIMAL(10,2)", "DECIMAL(12,2)", True),
        ("DECIMAL(10,2)", "DECIMAL(12,3)", True),
        ("DECIMAL(10,2)", "DECIMAL(10,3)", False),  # one integer digit fewer
        ("DATE", "TIMESTAMP", True),
        ("BIGINT", "INTEGER", False),
        ("VARCHAR", "INTEGER", False),
        ("INTEGER", "VARCHAR", False),
        ("varchar(20)", "varchar(10)", False),
        ("TIMESTAMP", "DATE", False),
        ("TIMESTAMP", "TIMESTAMP WITH TIME ZONE", False),
    ],
)
def test_widening(old: str, new: str, widening: bool) -> None:
    assert is_widening(parse_type(old), parse_type(new)) is widening


def test_cross_dialect_column_types() -> None:
    assert DUCKDB.column_type_from("character varying(20)", POSTGRES) == SqlType("string")
    assert DUCKDB.column_type_from("numeric", POSTGRES) == SqlType("float", 64)
    assert DUCKDB.column_type_from("numeric(50,2)", POSTGRES) == SqlType("float", 64)
    assert DUCKDB.column_type_from("numeric(10,2)", POSTGRES) == SqlType("decimal", 10, 2)
    assert POSTGRES.column_type_from("INTEGER[]", DUCKDB) == SqlType("string")
    assert POSTGRES.column_type_from("HUGEINT", DUCKDB) == SqlType("decimal", 38, 0)
    assert POSTGRES.column_type_from("UUID", DUCKDB) == SqlType("uuid")
    # Inside one dialect a type is kept as spelled, even one without a canonical twin.
    assert POSTGRES.column_type_from("int4range", POSTGRES) == SqlType("other", raw="int4range")
    assert DUCKDB.same_type(parse_type("VARCHAR"), parse_type("VARCHAR"))
    assert DUCKDB.same_type(parse_type("VARCHAR(20)"), parse_type("VARCHAR"))  # DuckDB has no lengths
    assert not POSTGRES.same_type(parse_type("varchar(20)"), parse_type("text"))
