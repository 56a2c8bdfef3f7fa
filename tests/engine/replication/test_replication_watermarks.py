"""Watermarks read in batches after same-warehouse copies, the incremental guard, the drift fast path, and
the scheduler handing out work before it records finished tables."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

from rocky_engine.adapters.base import Column, TableName
from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter
from rocky_engine.adapters.duckdb.dialect import DIALECT as DUCKDB
from rocky_engine.replication.copy_sql import CopySpec, read_watermark, read_watermarks
from rocky_engine.replication.drift import decide
from rocky_engine.run.concurrency import ConcurrencyLimit, StopRules, TaskResult, run_tables
from rocky_engine.run.replication_progress import MARK_BATCH
from tests.engine.replication.conftest import RecordingSink, ReplicationProject


def _spec(table: str, ts_type: str, strategy: str = "incremental") -> CopySpec:
    return CopySpec(strategy=strategy, source_rel=f"s.{table}",
                    target=TableName("wh", "t", table, f"t.{table}"),
                    columns=[Column("id", "BIGINT"), Column("ts", ts_type)], dialect=DUCKDB,
                    timestamp_column="ts")


@pytest.fixture
def warehouse(tmp_path: Path) -> DuckDbAdapter:
    adapter = DuckDbAdapter("wh", tmp_path / "wh.duckdb")
    for sql in (
        "CREATE SCHEMA t",
        "CREATE TABLE t.stamps AS SELECT range AS id, TIMESTAMP '2026-01-01' + to_seconds(range) AS ts "
        "FROM range(5)",
        "CREATE TABLE t.stamps2 AS SELECT range AS id, TIMESTAMP '2026-03-01' + to_seconds(range) AS ts "
        "FROM range(3)",
        "CREATE TABLE t.days AS SELECT range AS id, DATE '2026-01-01' + range::INTEGER AS ts FROM range(4)",
        "CREATE TABLE t.numbers AS SELECT range AS id, range * 10 AS ts FROM range(7)",
        "CREATE TABLE t.empty (id BIGINT, ts TIMESTAMP)",
    ):
        adapter.execute(sql)
    return adapter


def test_read_watermarks_reads_every_target_in_batches_by_type(warehouse: DuckDbAdapter) -> None:
    specs = [_spec("stamps", "TIMESTAMP"), _spec("days", "DATE"), _spec("numbers", "BIGINT"),
             _spec("stamps2", "TIMESTAMP"), _spec("empty", "TIMESTAMP"),
             _spec("absent", "TIMESTAMP", strategy="full_refresh")]
    found = read_watermarks(warehouse, specs)
    assert found.errors == {}
    assert found.marks == {
        "t.stamps": "2026-01-01T00:00:04",
        "t.days": "2026-01-04",
        "t.numbers": "60",
        "t.stamps2": "2026-03-01T00:00:02",
        "t.empty": None,
        "t.absent": None,  # full_refresh: no watermark, nothing read (the table does not even exist)
    }
    for spec in specs[:5]:
        assert found.marks[spec.target_rel] == read_watermark(warehouse, spec)
    warehouse.close()


def test_read_watermarks_reads_a_failed_batch_table_by_table(warehouse: DuckDbAdapter) -> None:
    specs = [_spec("stamps", "TIMESTAMP"), _spec("gone", "TIMESTAMP"), _spec("stamps2", "TIMESTAMP")]
    found = read_watermarks(warehouse, specs)
    assert found.marks == {"t.stamps": "2026-01-01T00:00:04", "t.stamps2": "2026-03-01T00:00:02"}
    assert list(found.errors) == ["t.gone"]
    assert found.errors["t.gone"].failure_kind == "not-found"
    warehouse.close()


def test_many_tables_get_their_watermarks_and_the_next_pass_copies_only_new_rows(
    rp: ReplicationProject,
) -> None:
    n = MARK_BATCH + 9  # more than one eager batch, plus the rest at the end
    rp.sql("CREATE SCHEMA src__x", *(
        f"CREATE TABLE src__x.t{i:02d} AS SELECT range AS id, 'v' AS v, "
        f"TIMESTAMP '2026-01-01' + to_seconds(range + {i}) AS ts FROM range(3)"
        for i in range(n)
    ))
    first = rp.run()
    assert first.status == "Success" and first.tables_copied == n
    for m in first.materializations:
        i = int(m.asset_key[-1][1:])
        expected = f"2026-01-01T00:00:{i + 2:02d}"
        # stored as read; written on the wire in UTC with Z (the published client requires an offset)
        assert m.metadata.watermark == expected + "Z"
        assert rp.watermark(m.metadata.target_table_full_name) == expected
    rp.sql(*(f"INSERT INTO src__x.t{i:02d} VALUES (9, 'new', TIMESTAMP '2026-02-01')"
             for i in range(0, n, 2)))
    second = rp.run()
    rows = {m.asset_key[-1]: m.rows_copied for m in second.materializations}
    assert rows == {f"t{i:02d}": 1 if i % 2 == 0 else 0 for i in range(n)}
    assert rp.watermark("wh.stg__x.t00") == "2026-02-01T00:00:00"
    assert rp.watermark("wh.stg__x.t01") == "2026-01-01T00:00:03"
    assert rp.count("stg__x.t00") == 4 and rp.count("stg__x.t01") == 3


def test_a_target_ahead_of_its_watermark_gets_only_newer_rows(rp: ReplicationProject) -> None:
    # A copy that landed but whose state write was lost: the target holds rows past the stored watermark.
    rp.source_table("src__orders", "orders", rows=10)
    rp.run()
    rp.append("src__orders", "orders", start=10, rows=5)
    rp.sql("INSERT INTO stg__orders.orders SELECT * FROM src__orders.orders WHERE id BETWEEN 10 AND 12")
    out = rp.run()
    assert out.materializations[0].rows_copied == 2
    assert rp.count("stg__orders.orders") == 15
    assert rp.query("SELECT count(DISTINCT id) FROM stg__orders.orders") == [(15,)]
    assert rp.watermark("wh.stg__orders.orders") == "2026-01-01T00:00:14"


def test_an_emptied_target_gets_the_rows_after_the_stored_watermark(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=10)
    rp.run()
    rp.append("src__orders", "orders", start=10, rows=3)
    rp.sql("DELETE FROM stg__orders.orders")
    out = rp.run()
    # The lower bound stays the stored watermark when the target has no rows to compare with.
    assert out.materializations[0].rows_copied == 3
    assert rp.query("SELECT min(id), max(id) FROM stg__orders.orders") == [(10, 12)]
    assert rp.watermark("wh.stg__orders.orders") == "2026-01-01T00:00:12"


def test_a_target_that_cannot_be_read_after_its_copy_keeps_its_stored_watermark(
    rp: ReplicationProject, caplog: pytest.LogCaptureFixture,
) -> None:
    rp.configure(sections="""
        [pipeline.raw.execution]
        concurrency = 1
        [pipeline.raw.checks]
        row_count = true
    """)
    rp.source_table("src__a", "first", rows=3)
    rp.source_table("src__b", "second", rows=3)
    rp.run()
    rp.append("src__a", "first", 3, 2)
    rp.append("src__b", "second", 3, 2)
    before = rp.watermark("wh.stg__a.first")
    path = str(rp.warehouse)

    def drop_target(event: str, table: str | None) -> None:
        if event == "check_result" and table == "wh.stg__a.first":
            # Copied and checked, its watermark not read yet (its read starts after this event, the
            # table's events then wait for it): the target vanishes meanwhile.
            con = duckdb.connect(path)
            con.execute("DROP TABLE stg__a.first")
            con.close()

    out = rp.run(events=RecordingSink(drop_target))
    assert out.status == "Success" and out.tables_copied == 2
    marks = {m.metadata.target_table_full_name: m.metadata.watermark for m in out.materializations}
    assert marks == {"wh.stg__a.first": None, "wh.stg__b.second": "2026-01-01T00:00:04Z"}
    assert rp.watermark("wh.stg__a.first") == before
    assert rp.watermark("wh.stg__b.second") == "2026-01-01T00:00:04"
    assert "table wh.stg__a.first was copied but its new watermark could not be read" in caplog.text
    assert "its stored watermark stays" in caplog.text


def test_identical_columns_are_no_drift_and_other_spellings_are_still_compared() -> None:
    cols = [Column("id", "INTEGER"), Column("v", "VARCHAR"), Column("ts", "TIMESTAMP")]
    assert not decide(cols, list(cols), source_dialect=DUCKDB, target_dialect=DUCKDB).drifted
    # Spelled differently but the same type: compared through the type rules, still no drift.
    spelled = [Column("id", "INT"), Column("v", "VARCHAR"), Column("ts", "TIMESTAMP")]
    assert not decide(cols, spelled, source_dialect=DUCKDB, target_dialect=DUCKDB).drifted
    widened = [Column("id", "BIGINT"), Column("v", "VARCHAR"), Column("ts", "TIMESTAMP")]
    narrower = decide(widened, cols, source_dialect=DUCKDB, target_dialect=DUCKDB)
    assert narrower.alter_columns == [("id", "BIGINT")]
    added = decide([*cols, Column("extra", "DOUBLE")], cols, source_dialect=DUCKDB, target_dialect=DUCKDB)
    assert added.add_columns == [("extra", "DOUBLE")]


def test_free_workers_get_their_next_table_before_finished_ones_are_recorded() -> None:
    started: dict[str, threading.Event] = {n: threading.Event() for n in ("a", "b", "c")}
    release_b = threading.Event()
    seen_c_started: list[bool] = []

    def task(name: str, worker: int) -> str:
        started[name].set()
        if name == "b":
            release_b.wait(5)
        return name

    def on_done(outcome: TaskResult[str]) -> None:
        if outcome.name == "a":
            # a's worker already has c: recording a never holds up the next table.
            seen_c_started.append(started["c"].wait(5))
            release_b.set()

    workers = iter(range(10))
    run, _ = run_tables(["a", "b", "c"], task, lambda: next(workers), ConcurrencyLimit(2, tables=3),
                        StopRules(), stop=threading.Event(), on_done=on_done)
    assert seen_c_started == [True]
    assert all(o.ok for o in run.outcomes.values()) and set(run.outcomes) == {"a", "b", "c"}
