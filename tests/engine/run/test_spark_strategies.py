"""`rocky run` on a real Spark Connect server (Parquet tables, the file capability level): every strategy.

One project, several runs, each asserting what the target holds afterwards: a full refresh builds a new
table and rebuilds an existing one; incremental appends only rows past the watermark; merge (a rewrite on
Parquet) keeps unchanged rows and updates changed ones; delete_insert replaces exactly the partitions the
SELECT has rows for; a view is a view; an ephemeral model is inlined and never materialized.
"""

from __future__ import annotations

import pytest

from tests.fixtures.spark_project import SparkProject

pytestmark = pytest.mark.spark

RAW = "raw_events"


def _seed(p: SparkProject, rows: str) -> None:
    p.sql(f"DROP TABLE IF EXISTS {p.schema}.{RAW}")
    p.sql(
        f"CREATE TABLE {p.schema}.{RAW} USING parquet AS SELECT * FROM VALUES {rows} "
        "AS v(id, category, amount, updated_at)"
    )


def _models(p: SparkProject) -> None:
    p.model("stg", f"SELECT id, category, amount, updated_at FROM {p.schema}.{RAW}")
    p.model("events_view", "SELECT id, amount FROM stg WHERE amount > 0", 'type = "view"')
    p.model("events_inc", "SELECT id, amount, updated_at FROM stg",
            'type = "incremental"\ntimestamp_column = "updated_at"')
    p.model("events_merge", "SELECT id, category, amount FROM stg", 'type = "merge"\nunique_key = ["id"]')
    p.model("by_category", "SELECT category, count(*) AS n, sum(amount) AS total FROM stg GROUP BY category",
            'type = "delete_insert"\npartition_by = ["category"]')
    p.model("big", "SELECT id FROM stg WHERE amount >= 10", 'type = "ephemeral"')
    p.model("big_count", "SELECT count(*) AS n FROM big")


def test_every_strategy_builds_then_reruns_on_spark(spark_project: SparkProject) -> None:
    p = spark_project
    _seed(p, "(1, 'a', 5, TIMESTAMP'2026-01-01 00:00:00'), (2, 'a', 10, TIMESTAMP'2026-01-02 00:00:00'), "
             "(3, 'b', 20, TIMESTAMP'2026-01-03 00:00:00')")
    _models(p)

    first = p.run()
    assert first.code == 0, first.result.stderr[-3000:]
    assert first.doc["status"] == "Success"
    built = first.by_model()
    assert set(built) == {"stg", "events_view", "events_inc", "events_merge", "by_category", "big_count"}
    assert built["stg"]["asset_key"] == ["spark_catalog", p.schema, "stg"]
    assert built["events_inc"]["metadata"]["watermark"].startswith("2026-01-03T00:00:00")
    assert p.relations() == {RAW: "table", "stg": "table", "events_view": "view", "events_inc": "table",
                             "events_merge": "table", "by_category": "table", "big_count": "table"}
    assert p.rows("big_count") == [(2,)]
    # delete_insert targets are partitioned by partition_by, which Spark stores as the last columns
    assert p.columns("by_category") == [("n", "bigint"), ("total", "bigint"), ("category", "string")]
    assert p.rows("by_category", "category") == [(2, 15, "a"), (1, 20, "b")]

    # Second run: id 2 changes, id 4 arrives (new category c), b disappears from the source.
    _seed(p, "(1, 'a', 5, TIMESTAMP'2026-01-01 00:00:00'), (2, 'a', 12, TIMESTAMP'2026-01-04 00:00:00'), "
             "(4, 'c', 40, TIMESTAMP'2026-01-05 00:00:00')")
    second = p.run()
    assert second.code == 0, second.result.stderr[-3000:]
    # full refresh of an existing table: exactly the new rows
    assert [r[:3] for r in p.rows("stg")] == [(1, "a", 5), (2, "a", 12), (4, "c", 40)]
    assert p.rows("events_view") == [(1, 5), (2, 12), (4, 40)]
    # incremental: only rows past the watermark (2026-01-03) were appended; 3 stays, 2's new version added
    assert [r[:2] for r in p.rows("events_inc", "updated_at")] == [(1, 5), (2, 10), (3, 20), (2, 12), (4, 40)]
    assert second.by_model()["events_inc"]["metadata"]["watermark"].startswith("2026-01-05T00:00:00")
    # merge by rewrite: 1 unchanged, 2 updated, 3 kept (not in the source any more), 4 inserted
    assert p.rows("events_merge") == [(1, "a", 5), (2, "a", 12), (3, "b", 20), (4, "c", 40)]
    # delete_insert: partitions a and c replaced, b (absent from this run's rows) untouched
    assert p.rows("by_category", "category") == [(2, 17, "a"), (1, 20, "b"), (1, 40, "c")]
    assert p.rows("big_count") == [(2,)]
    assert "big" not in p.relations()
    # No stage or swapped-out table is left beside the targets.
    assert not [name for name in p.relations() if name.startswith("__rocky_")]

    # Third run, nothing new: the incremental appends nothing, the partitioned table keeps its rows.
    third = p.run()
    assert third.code == 0, third.result.stderr[-3000:]
    assert len(p.rows("events_inc")) == 5
    assert p.rows("by_category", "category") == [(2, 17, "a"), (1, 20, "b"), (1, 40, "c")]
