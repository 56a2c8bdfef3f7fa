"""The drift decision before a copy: add, widen, or rebuild, judged by the target's dialect."""

from __future__ import annotations

from rocky_engine.adapters.base import Column
from rocky_engine.adapters.duckdb.dialect import DIALECT as DUCKDB
from rocky_engine.adapters.postgres.dialect import DIALECT as POSTGRES
from rocky_engine.replication.drift import ADD_COLUMN, ALTER_COLUMN_TYPE, DROP_AND_RECREATE, decide


def _cols(*pairs: str) -> list[Column]:
    return [Column(p.split()[0], " ".join(p.split()[1:])) for p in pairs]


def test_no_drift() -> None:
    decision = decide(_cols("id INTEGER", "v VARCHAR"), _cols("id INTEGER", "v VARCHAR"),
                      source_dialect=DUCKDB, target_dialect=DUCKDB)
    assert not decision.drifted and not decision.rebuild


def test_add_and_widen() -> None:
    decision = decide(
        _cols("id BIGINT", "v VARCHAR", "amount DECIMAL(12,2)", "note VARCHAR"),
        _cols("id INTEGER", "v VARCHAR", "amount DECIMAL(10,2)"),
        source_dialect=DUCKDB, target_dialect=DUCKDB,
    )
    assert not decision.rebuild
    assert decision.add_columns == [("note", "VARCHAR")]
    assert decision.alter_columns == [("id", "BIGINT"), ("amount", "DECIMAL(12,2)")]
    assert [s.action for s in decision.steps] == [ALTER_COLUMN_TYPE, ALTER_COLUMN_TYPE, ADD_COLUMN]
    assert decision.steps[0].reason == "column 'id' widened INTEGER -> BIGINT"
    assert decision.steps[2].reason == "column 'note' (VARCHAR) is new in the source"


def test_non_widening_change_rebuilds() -> None:
    decision = decide(_cols("id INTEGER", "v INTEGER", "x VARCHAR"), _cols("id BIGINT", "v VARCHAR"),
                      source_dialect=DUCKDB, target_dialect=DUCKDB)
    assert decision.rebuild
    assert [s.action for s in decision.steps] == [DROP_AND_RECREATE]
    assert decision.steps[0].reason == (
        "column 'id' changed BIGINT -> INTEGER, which is not a safe widening; "
        "column 'v' changed VARCHAR -> INTEGER, which is not a safe widening"
    )


def test_dropped_source_column_is_not_drift() -> None:
    decision = decide(_cols("id INTEGER"), _cols("id INTEGER", "gone VARCHAR"),
                      source_dialect=DUCKDB, target_dialect=DUCKDB)
    assert not decision.drifted


def test_postgres_lengths_do_not_look_like_drift_in_duckdb() -> None:
    decision = decide(_cols("v character varying(20)", "n numeric"), _cols("v VARCHAR", "n DOUBLE"),
                      source_dialect=POSTGRES, target_dialect=DUCKDB)
    assert not decision.drifted
