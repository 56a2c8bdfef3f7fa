"""Column types across dialects, safe widenings, and the drift decision before a copy."""

from __future__ import annotations

import pytest

from rocky_engine.adapters.base import Column
from rocky_engine.replication.drift import ADD_COLUMN, ALTER_COLUMN_TYPE, DROP_AND_RECREATE, decide
from rocky_engine.replication.sql_types import (
    SqlType,
    is_widening,
    parse_type,
    render_type,
    same_type,
    target_type,
)


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
    assert render_type(SqlType("decimal", 10, 2), "duckdb") == "DECIMAL(10,2)"
    assert render_type(SqlType("decimal", 10, 2), "postgres") == "numeric(10,2)"
    assert render_type(SqlType("string", 20), "postgres") == "varchar(20)"
    assert render_type(SqlType("string", 20), "duckdb") == "VARCHAR"
    assert render_type(SqlType("decimal"), "duckdb") == "DOUBLE"
    assert render_type(SqlType("int", 128), "postgres") == "numeric(38,0)"


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


def test_cross_dialect_target_types() -> None:
    assert target_type("character varying(20)", "postgres", "duckdb") == SqlType("string")
    assert target_type("numeric", "postgres", "duckdb") == SqlType("float", 64)
    assert target_type("INTEGER[]", "duckdb", "postgres") == SqlType("string")
    assert target_type("HUGEINT", "duckdb", "postgres") == SqlType("decimal", 38, 0)
    assert same_type(parse_type("VARCHAR"), parse_type("VARCHAR"), "duckdb")


def _cols(*pairs: str) -> list[Column]:
    return [Column(p.split()[0], " ".join(p.split()[1:])) for p in pairs]


def test_no_drift() -> None:
    decision = decide(_cols("id INTEGER", "v VARCHAR"), _cols("id INTEGER", "v VARCHAR"),
                      source_dialect="duckdb", target_dialect="duckdb")
    assert not decision.drifted and not decision.rebuild


def test_add_and_widen() -> None:
    decision = decide(
        _cols("id BIGINT", "v VARCHAR", "amount DECIMAL(12,2)", "note VARCHAR"),
        _cols("id INTEGER", "v VARCHAR", "amount DECIMAL(10,2)"),
        source_dialect="duckdb", target_dialect="duckdb",
    )
    assert not decision.rebuild
    assert decision.add_columns == [("note", "VARCHAR")]
    assert decision.alter_columns == [("id", "BIGINT"), ("amount", "DECIMAL(12,2)")]
    assert [s.action for s in decision.steps] == [ALTER_COLUMN_TYPE, ALTER_COLUMN_TYPE, ADD_COLUMN]
    assert decision.steps[0].reason == "column 'id' widened INTEGER -> BIGINT"
    assert decision.steps[2].reason == "column 'note' (VARCHAR) is new in the source"


def test_non_widening_change_rebuilds() -> None:
    decision = decide(_cols("id INTEGER", "v INTEGER", "x VARCHAR"), _cols("id BIGINT", "v VARCHAR"),
                      source_dialect="duckdb", target_dialect="duckdb")
    assert decision.rebuild
    assert [s.action for s in decision.steps] == [DROP_AND_RECREATE]
    assert decision.steps[0].reason == (
        "column 'id' changed BIGINT -> INTEGER, which is not a safe widening; "
        "column 'v' changed VARCHAR -> INTEGER, which is not a safe widening"
    )


def test_dropped_source_column_is_not_drift() -> None:
    decision = decide(_cols("id INTEGER"), _cols("id INTEGER", "gone VARCHAR"),
                      source_dialect="duckdb", target_dialect="duckdb")
    assert not decision.drifted


def test_postgres_lengths_do_not_look_like_drift_in_duckdb() -> None:
    decision = decide(_cols("v character varying(20)", "n numeric"), _cols("v VARCHAR", "n DOUBLE"),
                      source_dialect="postgres", target_dialect="duckdb")
    assert not decision.drifted
