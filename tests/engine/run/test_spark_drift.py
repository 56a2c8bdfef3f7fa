"""Schema drift of incremental and merge models on Spark's Parquet tables, which cannot alter a column.

A new column in the SELECT is added with ``ALTER TABLE ADD COLUMNS`` (old rows read NULL); a changed type
or a dropped column rebuilds the table with the SELECT's columns and keeps its rows (cast to the new type).
"""

from __future__ import annotations

import pytest

from tests.fixtures.spark_project import SparkProject

pytestmark = pytest.mark.spark

INC = 'type = "incremental"\ntimestamp_column = "ts"'
MERGE = 'type = "merge"\nunique_key = ["id"]'


def _src(p: SparkProject, ids: range, extra: str = "") -> None:
    p.model("src", f"SELECT id, CAST(id * 10 AS INT) AS amount, TIMESTAMP'2026-01-01 00:00:00' + "
                   f"make_interval(0, 0, 0, CAST(id AS INT)) AS ts{extra} "
                   f"FROM range({ids.start}, {ids.stop})")


def test_new_column_is_added_and_a_type_change_rebuilds_keeping_rows(spark_project: SparkProject) -> None:
    p = spark_project
    _src(p, range(1, 3))
    p.model("inc", "SELECT id, amount, ts FROM src", INC)
    p.model("mrg", "SELECT id, amount FROM src", MERGE)
    first = p.run()
    assert first.code == 0, first.result.stderr[-3000:]

    # A new column: added in place, the old rows read NULL in it.
    _src(p, range(1, 4), ", 'n' AS note")
    p.model("inc", "SELECT id, amount, ts, note FROM src", INC)
    p.model("mrg", "SELECT id, amount, note FROM src", MERGE)
    second = p.run()
    assert second.code == 0, second.result.stderr[-3000:]
    assert p.columns("inc") == [("id", "bigint"), ("amount", "int"), ("ts", "timestamp"), ("note", "string")]
    assert [(r[0], r[3]) for r in p.rows("inc")] == [(1, None), (2, None), (3, "n")]
    assert p.rows("mrg") == [(1, 10, "n"), (2, 20, "n"), (3, 30, "n")]

    # amount becomes DOUBLE and note is dropped: Parquet cannot alter that, so both tables are rebuilt
    # with the new columns and keep every row they had.
    p.model("src", "SELECT id, CAST(id * 10 AS DOUBLE) + 0.5 AS amount, TIMESTAMP'2026-01-01 00:00:00' + "
                   "make_interval(0, 0, 0, CAST(id AS INT)) AS ts FROM range(2, 5)")
    p.model("inc", "SELECT id, amount, ts FROM src", INC)
    p.model("mrg", "SELECT id, amount FROM src", MERGE)
    third = p.run()
    assert third.code == 0, third.result.stderr[-3000:]
    assert p.columns("inc") == [("id", "bigint"), ("amount", "double"), ("ts", "timestamp")]
    assert [r[:2] for r in p.rows("inc")] == [(1, 10.0), (2, 20.0), (3, 30.0), (4, 40.5)]
    assert p.columns("mrg") == [("id", "bigint"), ("amount", "double")]
    assert p.rows("mrg") == [(1, 10.0), (2, 20.5), (3, 30.5), (4, 40.5)]
    assert not [n for n in p.relations() if n.startswith("__rocky_")]
