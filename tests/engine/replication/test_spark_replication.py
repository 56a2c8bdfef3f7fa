"""Replication into and out of Spark on a real Spark Connect server: DuckDB -> Spark (Arrow upload),
PostgreSQL -> Spark (staged Parquet), Spark -> DuckDB; first and incremental passes, exact types, NULLs,
drift, a failed table that keeps its watermark, and a re-copy after a lost state write without duplicates."""

from __future__ import annotations

import datetime as dt
import textwrap
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.state.store import StateStore
from tests.engine.replication.conftest import RecordingSink, ReplicationProject
from tests.fixtures.postgres import PgDatabase
from tests.fixtures.spark_server import SparkServer

pytestmark = [pytest.mark.slow]

UTC = dt.UTC
SPARK_CATALOG = "spark_catalog"


def _config(
    server: SparkServer, source: str, target: str, *, catalog: str, prefix: str, schema_template: str,
    staging: Path | None = None, pg: PgDatabase | None = None, extra: str = "",
) -> str:
    staging_line = f'staging_dir = "{staging}"' if staging is not None else ""
    pg_block = f'[adapter.pg]\ntype = "postgres"\ndsn = "{pg.conninfo}"\n' if pg is not None else ""
    return textwrap.dedent(f"""\
        [adapter.wh]
        type = "duckdb"
        path = "wh.duckdb"

        [adapter.lake]
        type = "spark"
        remote = "{server.url}"
        {staging_line}

        {pg_block}
        [pipeline.raw]
        type = "replication"
        timestamp_column = "ts"
        {extra}

        [pipeline.raw.source]
        adapter = "{source}"

        [pipeline.raw.source.schema_pattern]
        prefix = "{prefix}"
        separator = "__"
        components = ["source"]

        [pipeline.raw.target]
        adapter = "{target}"
        catalog_template = "{catalog}"
        schema_template = "{schema_template}"
    """)


def _spark(server: SparkServer, sql: str) -> list[tuple[Any, ...]]:
    """Rows of one statement, through Arrow (a TIMESTAMP comes back as an aware UTC datetime)."""
    session = server.session()
    try:
        table = session.sql(sql).toArrow()
        return list(zip(*(c.to_pylist() for c in table.columns), strict=True))
    finally:
        session.stop()


@pytest.fixture
def names(spark_server: SparkServer) -> str:
    """A schema-name stem of this test's own (the session's server is shared); tests drop their schemas."""
    return uuid.uuid4().hex[:8]


def _drop_schemas(server: SparkServer, *schemas: str) -> None:
    for schema in schemas:
        _spark(server, f"DROP DATABASE IF EXISTS {schema} CASCADE")


def test_duckdb_to_spark_first_and_incremental(spark_server: SparkServer, names: str, tmp_path: Path) -> None:
    src, stg = f"src{names}", f"stg{names}"
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(spark_server, "wh", "lake", catalog=SPARK_CATALOG, prefix=src,
                            schema_template=f"{stg}__{{source}}"))
    rp.sql(
        f"CREATE SCHEMA {src}__shop",
        f"CREATE TABLE {src}__shop.orders AS SELECT range::INTEGER AS id, 'n' || range AS name, "
        "(range * 1.25)::DECIMAL(12,2) AS amount, (range * 1e10)::DECIMAL(38,4) AS big, "
        "CASE WHEN range % 4 = 0 THEN NULL ELSE range / 2 END AS maybe, "
        "TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_hours(range) AS tz, "
        "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range(3000)",
    )
    try:
        first = rp.run()
        assert first.status == "Success", first.errors
        m = first.materializations[0]
        assert m.asset_key == ["duckdb", "shop", "orders"]
        assert m.rows_copied == 3000
        assert m.metadata.watermark == "2026-01-01T00:49:59Z"
        target = f"{stg}__shop.orders"
        types = [(r[0], r[1]) for r in _spark(spark_server, f"DESCRIBE TABLE {target}")]
        assert types == [("id", "int"), ("name", "string"), ("amount", "decimal(12,2)"),
                         ("big", "decimal(38,4)"), ("maybe", "double"), ("tz", "timestamp"),
                         ("ts", "timestamp_ntz")]
        assert _spark(spark_server, f"SELECT count(*), sum(id), count(maybe), sum(amount) FROM {target}") == [
            (3000, 4498500, 2250, Decimal("5623125.00"))]
        assert _spark(spark_server, f"SELECT big, tz FROM {target} WHERE id = 3") == [
            (Decimal("30000000000.0000"), dt.datetime(2026, 1, 1, 3, tzinfo=UTC))]

        # Incremental: only the newer rows, and a column new in the source is added (drift).
        rp.sql(f"ALTER TABLE {src}__shop.orders ADD COLUMN note VARCHAR",
               f"INSERT INTO {src}__shop.orders (id, name, ts, note) SELECT range, 'late', "
               "TIMESTAMP '2026-02-01' + to_seconds(range), 'x' FROM range(5000, 5010)")
        second = rp.run()
        assert second.status == "Success", second.errors
        assert second.materializations[0].rows_copied == 10
        assert [(a.action, a.reason) for a in second.drift.actions_taken] == [
            ("add_column", "column 'note' (STRING) is new in the source")]
        assert _spark(spark_server, f"SELECT count(*), sum(id), count(note) FROM {target}") == [
            (3010, 4498500 + 50045, 10)]
        assert rp.watermark(f"{SPARK_CATALOG}.{stg}__shop.orders") == "2026-02-01T01:23:29"

        # The state write of a copy is lost (a crash after the copy): the next copy adds nothing twice.
        with StateStore.open(rp.state_path, writer=True) as store:
            store.watermarks.set(f"{SPARK_CATALOG}.{stg}__shop.orders", "2026-01-01T00:49:59")
        third = rp.run()
        assert third.status == "Success", third.errors
        assert third.materializations[0].rows_copied == 0
        assert _spark(spark_server, f"SELECT count(*) FROM {target}") == [(3010,)]
    finally:
        _drop_schemas(spark_server, f"{stg}__shop")


def test_a_failed_table_keeps_its_watermark(spark_server: SparkServer, names: str, tmp_path: Path) -> None:
    src, stg = f"src{names}", f"stg{names}"
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(spark_server, "wh", "lake", catalog=SPARK_CATALOG, prefix=src,
                            schema_template=f"{stg}__{{source}}", staging=tmp_path))
    rp.source_table(f"{src}__a", "good", rows=5)
    rp.source_table(f"{src}__b", "bad", rows=5)
    good, bad = f"{SPARK_CATALOG}.{stg}__a.good", f"{SPARK_CATALOG}.{stg}__b.bad"
    try:
        first = rp.run()
        assert first.status == "Success", first.errors
        assert rp.watermark(good) == rp.watermark(bad) == "2026-01-01T00:00:04"
        rp.append(f"{src}__a", "good", 5, 3)
        rp.append(f"{src}__b", "bad", 5, 3)

        def break_bad(event: str, table: str | None) -> None:
            if event == "before_materialize" and table == bad:
                _spark(spark_server, f"DROP DATABASE {stg}__b CASCADE")  # the target vanishes mid-run

        second = rp.run(events=RecordingSink(break_bad))
        assert second.status == "PartialFailure"
        assert [e.asset_key for e in second.errors] == [["duckdb", "b", "bad"]]
        assert second.errors[0].failure_kind == "not-found"
        assert rp.watermark(good) == "2026-01-01T00:00:07"
        assert rp.watermark(bad) == "2026-01-01T00:00:04"  # never advanced for the failed table

        third = rp.run()  # the schema is created again and the table copied whole
        assert third.status == "Success", third.errors
        assert _spark(spark_server, f"SELECT count(*), sum(id) FROM {stg}__b.bad") == [(8, 28)]
        assert rp.watermark(bad) == "2026-01-01T00:00:07"
        assert list(tmp_path.glob("rocky-stage-*")) == []  # staged Parquet removed, failure or not
    finally:
        _drop_schemas(spark_server, f"{stg}__a", f"{stg}__b")


def test_merge_into_parquet_rewrites_keeping_unchanged_rows(
    spark_server: SparkServer, names: str, tmp_path: Path
) -> None:
    src, stg = f"src{names}", f"stg{names}"
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(spark_server, "wh", "lake", catalog=SPARK_CATALOG, prefix=src,
                            schema_template=f"{stg}__{{source}}",
                            extra='strategy = "merge"\nmerge_keys = ["id"]'))
    rp.source_table(f"{src}__m", "items", rows=5)
    try:
        assert rp.run().status == "Success"
        # Two versions of id 1 arrive at once (the newer wins), id 3 changes, id 9 is new.
        rp.sql(f"INSERT INTO {src}__m.items VALUES (1, 'old', TIMESTAMP '2026-01-02'), "
               f"(1, 'new', TIMESTAMP '2026-01-03'), (3, 'changed', TIMESTAMP '2026-01-02'), "
               f"(9, 'v9', TIMESTAMP '2026-01-02')")
        second = rp.run()
        assert second.status == "Success", second.errors
        assert _spark(spark_server, f"SELECT id, v FROM {stg}__m.items ORDER BY id") == [
            (0, "v0"), (1, "new"), (2, "v2"), (3, "changed"), (4, "v4"), (9, "v9")]
        assert rp.watermark(f"{SPARK_CATALOG}.{stg}__m.items") == "2026-01-03T00:00:00"
    finally:
        _drop_schemas(spark_server, f"{stg}__m")


@pytest.mark.services
def test_postgres_to_spark_staged_parquet(
    spark_server: SparkServer, names: str, pg_db: PgDatabase, tmp_path: Path
) -> None:
    stg = f"stg{names}"
    staging = tmp_path / "staging"
    staging.mkdir()
    pg_db.sql(
        "CREATE SCHEMA src__pg; CREATE TABLE src__pg.events (id bigint, amount numeric(12,2), "
        "label varchar(20), at timestamptz, ts timestamp);"
        "INSERT INTO src__pg.events SELECT g, g * 0.25, CASE WHEN g % 5 = 0 THEN NULL ELSE 'l' || g END, "
        "TIMESTAMPTZ '2026-01-01 00:00+00' + g * INTERVAL '1 hour', TIMESTAMP '2026-01-01' + g * INTERVAL "
        "'1 second' FROM generate_series(1, 2000) g"
    )
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(spark_server, "pg", "lake", catalog=SPARK_CATALOG, prefix="src",
                            schema_template=f"{stg}__{{source}}", staging=staging, pg=pg_db))
    try:
        first = rp.run()
        assert first.status == "Success", first.errors
        assert first.materializations[0].rows_copied == 2000
        target = f"{stg}__pg.events"
        types = [(r[0], r[1]) for r in _spark(spark_server, f"DESCRIBE TABLE {target}")]
        assert types == [("id", "bigint"), ("amount", "decimal(12,2)"), ("label", "string"),
                         ("at", "timestamp"), ("ts", "timestamp_ntz")]
        assert _spark(spark_server, f"SELECT count(*), sum(id), sum(amount), count(label) FROM {target}") == [
            (2000, 2001000, Decimal("500250.00"), 1600)]
        assert _spark(spark_server, f"SELECT at FROM {target} WHERE id = 1") == [
            (dt.datetime(2026, 1, 1, 1, tzinfo=UTC),)]

        pg_db.sql("INSERT INTO src__pg.events (id, amount, ts) VALUES (9001, 1.5, TIMESTAMP '2026-03-01')")
        second = rp.run()
        assert second.status == "Success", second.errors
        assert second.materializations[0].rows_copied == 1
        assert _spark(spark_server, f"SELECT count(*), sum(id) FROM {target}") == [(2001, 2001000 + 9001)]
        assert list(staging.iterdir()) == []
    finally:
        _drop_schemas(spark_server, f"{stg}__pg")


def test_spark_to_duckdb(spark_server: SparkServer, names: str, tmp_path: Path) -> None:
    src = f"src{names}"
    _spark(spark_server, f"CREATE DATABASE {src}__lake")
    _spark(spark_server,
           f"CREATE TABLE {src}__lake.events USING parquet AS SELECT id, "
           "CAST(id * 0.5 AS DECIMAL(10,2)) AS amount, "
           "CASE WHEN id % 3 = 0 THEN NULL ELSE concat('e', id) END AS label, "
           "timestamp_seconds(1767225600 + id) AS at, "
           "CAST(timestamp_seconds(1767225600 + id) AS TIMESTAMP_NTZ) AS ts FROM range(1500)")
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(spark_server, "lake", "wh", catalog="wh", prefix=src,
                            schema_template="stg__{source}"))
    try:
        first = rp.run()
        assert first.status == "Success", first.errors
        m = first.materializations[0]
        assert m.asset_key == ["spark", "lake", "events"]
        assert m.rows_copied == 1500
        types = dict(rp.query("SELECT column_name, data_type FROM information_schema.columns "
                              "WHERE table_schema = 'stg__lake' AND table_name = 'events'"))
        assert types == {"id": "BIGINT", "amount": "DECIMAL(10,2)", "label": "VARCHAR",
                         "at": "TIMESTAMP WITH TIME ZONE", "ts": "TIMESTAMP"}
        assert rp.query("SELECT count(*), sum(id), count(label), sum(amount) FROM stg__lake.events") == [
            (1500, 1124250, 1000, Decimal("562125.00"))]
        assert rp.query('SELECT epoch("at"), ts FROM stg__lake.events WHERE id = 2') == [
            (1767225602.0, dt.datetime(2026, 1, 1, 0, 0, 2))]

        _spark(spark_server, f"INSERT INTO {src}__lake.events SELECT id, 1, 'new', "
               "timestamp_seconds(1767225600 + id), "
               "CAST(timestamp_seconds(1767225600 + id) AS TIMESTAMP_NTZ) FROM range(2000, 2004)")
        second = rp.run()
        assert second.status == "Success", second.errors
        assert second.materializations[0].rows_copied == 4
        assert rp.count("stg__lake.events") == 1504
    finally:
        _drop_schemas(spark_server, f"{src}__lake")
