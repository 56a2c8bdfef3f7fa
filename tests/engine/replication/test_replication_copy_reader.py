"""PostgreSQL -> DuckDB through the COPY CSV reader: exact types whatever the source session's settings,
failures that leave the target and the watermark alone, and parallel range reads that cover every row."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.adapters.postgres.adapter import PostgresAdapter
from rocky_engine.adapters.postgres.dialect import DIALECT
from rocky_engine.config.adapters import PostgresAdapterConfig
from rocky_engine.errors import ConfigError
from rocky_engine.replication.ranges import range_statements, resolve_reads
from tests.engine.replication.conftest import ReplicationProject
from tests.engine.replication.test_replication_postgres import _config
from tests.fixtures.postgres import PgDatabase

pytestmark = [pytest.mark.services, pytest.mark.slow]

_COLUMNS = (
    "id integer, s smallint, b bigint, n numeric(38,10), m numeric(12,2), big numeric, f double precision, "
    "r real, flag boolean, d date, t time, ts timestamp, tz timestamptz, txt text, v varchar(8), by bytea, "
    "u uuid, j jsonb, ivl interval"
)
_ROWS = [
    "(1, 32767, 9223372036854775807, 1234567890123456789012345678.1234567890, -99999999.99, 1e30, "
    "0.30000000000000004, 1.1, true, '2026-03-04', '23:59:59.999999', '2026-03-04 05:06:07.123456', "
    "'2026-03-04 05:06:07.123456+05:30', E'a,\"b\"\\nc', 'héllo', '\\x00ff5c', "
    "'c81e728d-9d4c-2f63-6f06-7f89cc14862c', '{\"k\": [1, 2]}', '1 day 02:03:04')",
    "(2, -32768, -9223372036854775808, -0.0000000001, 0, -1.5, 'NaN', '-Infinity', false, '0001-01-01', "
    "'00:00:00', '1850-01-01 00:00:00', '1850-01-01 00:00:00+00', '', '日本', '\\x', NULL, NULL, NULL)",
    "(3, NULL, NULL, NULL, NULL, NULL, 'Infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'NULL', NULL, "
    "NULL, NULL, NULL)",
]


def _exact_settings(pg_db: PgDatabase) -> None:
    """Source-session defaults under which a reader that relied on them would print the wrong text."""
    pg_db.sql(f"ALTER DATABASE {pg_db.name} SET timezone TO 'America/New_York';"
              f"ALTER DATABASE {pg_db.name} SET datestyle TO 'SQL, DMY';"
              f"ALTER DATABASE {pg_db.name} SET extra_float_digits TO 0;"
              f"ALTER DATABASE {pg_db.name} SET client_encoding TO 'LATIN1'")


def test_types_arrive_exact_whatever_the_source_session_settings(pg_db: PgDatabase, tmp_path: Path) -> None:
    pg_db.sql(f"CREATE SCHEMA src__shop; CREATE TABLE src__shop.all_types ({_COLUMNS});"
              f"INSERT INTO src__shop.all_types VALUES {', '.join(_ROWS)}")
    _exact_settings(pg_db)
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(pg_db, "pg", "wh").replace('timestamp_column = "ts"', 'timestamp_column = "tz"'))
    out = rp.run()
    assert out.status == "Success", out.errors
    assert out.materializations[0].rows_copied == 3
    rows = rp.query("SELECT * EXCLUDE (u, j, ivl), u::VARCHAR, j::VARCHAR, ivl FROM stg__shop.all_types "
                    "ORDER BY id")
    utc = dt.UTC
    assert rows[0] == (
        1, 32767, 9223372036854775807, Decimal("1234567890123456789012345678.1234567890"),
        Decimal("-99999999.99"), 1e30, 0.30000000000000004, pytest.approx(1.1), True, dt.date(2026, 3, 4),
        dt.time(23, 59, 59, 999999), dt.datetime(2026, 3, 4, 5, 6, 7, 123456),
        dt.datetime(2026, 3, 3, 23, 36, 7, 123456, tzinfo=utc), 'a,"b"\nc', "héllo", b"\x00\xff\x5c",
        "c81e728d-9d4c-2f63-6f06-7f89cc14862c", '{"k": [1, 2]}', dt.timedelta(days=1, seconds=7384),
    )
    assert rows[1][:9] == (2, -32768, -9223372036854775808, Decimal("-0.0000000001"), Decimal("0.00"), -1.5,
                           pytest.approx(float("nan"), nan_ok=True), float("-inf"), False)
    assert rows[1][9:16] == (dt.date(1, 1, 1), dt.time(0), dt.datetime(1850, 1, 1),
                             dt.datetime(1850, 1, 1, tzinfo=utc), "", "日本", b"")
    assert rows[1][16:] == (None, None, None)
    assert rows[2] == (3, *[None] * 5, float("inf"), *[None] * 7, "NULL", *[None] * 4)
    types = dict(rp.query("SELECT column_name, data_type FROM information_schema.columns "
                          "WHERE table_name = 'all_types'"))
    assert (types["n"], types["m"], types["big"], types["tz"]) == (
        "DECIMAL(38,10)", "DECIMAL(12,2)", "DOUBLE", "TIMESTAMP WITH TIME ZONE")
    assert out.materializations[0].metadata.watermark == "2026-03-03T23:36:07.123456Z"

    # Incremental: only the newer row; the bound is the target's own maximum.
    pg_db.sql("INSERT INTO src__shop.all_types (id, tz) VALUES (4, '2026-03-04 00:00:00+00'), "
              "(5, '2026-01-01 00:00:00+00')")
    second = rp.run()
    assert second.status == "Success", second.errors
    assert second.materializations[0].rows_copied == 1
    assert rp.query("SELECT list(id ORDER BY id) FROM stg__shop.all_types") == [([1, 2, 3, 4],)]


def test_a_value_the_reader_cannot_parse_fails_the_table_and_keeps_target_and_watermark(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.sql("CREATE SCHEMA src__shop;"
              "CREATE TABLE src__shop.a (id integer, amount numeric(10,2), ts timestamp);"
              "CREATE TABLE src__shop.b (id integer, ts timestamp);"
              "INSERT INTO src__shop.a SELECT g, g, TIMESTAMP '2026-01-01' + g * INTERVAL '1 s' "
              "FROM generate_series(1, 100) g;"
              "INSERT INTO src__shop.b SELECT g, TIMESTAMP '2026-01-01' FROM generate_series(1, 10) g")
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(pg_db, "pg", "wh", extra="[pipeline.raw.execution]\nconcurrency = 1\n"
                            "table_retries = 0"))
    assert rp.run().status == "Success"
    mark = rp.watermark("wh.stg__shop.a")
    # numeric NaN has no DECIMAL twin: the parse fails in the middle of the stream.
    pg_db.sql("INSERT INTO src__shop.a SELECT g, CASE WHEN g = 150 THEN 'NaN'::numeric ELSE g END, "
              "TIMESTAMP '2026-02-01' + g * INTERVAL '1 s' FROM generate_series(101, 200) g;"
              "INSERT INTO src__shop.b VALUES (11, TIMESTAMP '2026-02-01')")
    out = rp.run()
    assert out.status == "PartialFailure"
    [error] = out.errors
    assert error.asset_key[-1] == "a"
    assert "NaN" in error.error
    assert rp.count("stg__shop.a") == 100  # the insert rolled back whole
    assert rp.watermark("wh.stg__shop.a") == mark
    assert rp.count("stg__shop.b") == 11  # the same worker's next table copied fine


# --- parallel range reads ------------------------------------------------------------------------


def test_auto_reads_one_stream_below_four_cores_or_a_million_rows() -> None:
    assert resolve_reads("auto", 5_000_000, cores=2) == 1
    assert resolve_reads("auto", 999_999, cores=16) == 1
    assert resolve_reads("auto", None, cores=16) == 1
    assert resolve_reads("auto", 1_000_000, cores=4) == 2
    assert resolve_reads("auto", 2_000_000, cores=64) == 4
    assert resolve_reads(3, 10, cores=1) == 3


@pytest.fixture
def pg(pg_db: PgDatabase) -> Iterator[PostgresAdapter]:
    s = pg_db.server
    cfg = PostgresAdapterConfig.model_validate({"type": "postgres", "host": s.host, "port": s.port,
                                                "user": s.user, "password": s.password, "dbname": pg_db.name})
    adapter = PostgresAdapter.connect("pg", cfg)
    yield adapter
    adapter.close()


def _ranges(
    pg: PostgresAdapter, table: str, key: str, key_type: str, where: str = ""
) -> list[tuple[str, list[Any]]]:
    return range_statements(pg, DIALECT, f"SELECT id, ts FROM {table}{where}", [], has_where=bool(where),
                            key=key, key_type=key_type, reads=3)


def test_ranges_cover_every_row_once_null_keys_included(pg_db: PgDatabase, pg: PostgresAdapter) -> None:
    pg_db.sql("CREATE TABLE t (id integer, ts timestamptz);"
              "INSERT INTO t SELECT g, TIMESTAMPTZ '2026-01-01 00:00+00' + g * INTERVAL '1 minute' "
              "FROM generate_series(1, 1000) g; INSERT INTO t VALUES (NULL, NULL), (NULL, NULL);"
              "CREATE TABLE empty (id integer, ts timestamptz);"
              "CREATE TABLE one (id integer, ts timestamptz);"
              "INSERT INTO one VALUES (7, now()); CREATE TABLE nulls (id integer, ts timestamptz);"
              "INSERT INTO nulls VALUES (NULL, NULL)")
    for key, key_type in (("id", "integer"), ("ts", "timestamp with time zone")):
        parts = _ranges(pg, "t", key, key_type)
        assert len(parts) == 3
        seen = [row for sql, params in parts for row in pg.query(sql, params)]
        assert len(seen) == 1002
        assert sum(r[0] for r in seen if r[0] is not None) == 500500
        assert sorted(r[0] for r in seen if r[0] is not None) == list(range(1, 1001))
    # An incremental bound applies to the min/max and to every range.
    parts = _ranges(pg, "t", "id", "integer", where=" WHERE id > 900")
    assert len(parts) == 3
    assert sum(len(pg.query(sql, params)) for sql, params in parts) == 100
    for table in ("empty", "one", "nulls"):
        assert _ranges(pg, table, "id", "integer") == [(f"SELECT id, ts FROM {table}", [])]


def test_parallel_reads_copy_every_row_first_and_incremental(pg_db: PgDatabase, tmp_path: Path) -> None:
    pg_db.sql("CREATE SCHEMA src__shop;"
              "CREATE TABLE src__shop.big (id bigint, ts timestamp, note text);"
              "INSERT INTO src__shop.big SELECT g, TIMESTAMP '2026-01-01' + g * INTERVAL '1 s', 'n' || g "
              "FROM generate_series(1, 30000) g; INSERT INTO src__shop.big VALUES (NULL, NULL, 'no key');"
              "CREATE TABLE src__shop.empty (id bigint, ts timestamp);"
              "CREATE TABLE src__shop.one (id bigint, ts timestamp); INSERT INTO src__shop.one VALUES "
              "(42, TIMESTAMP '2026-01-01')")
    rp = ReplicationProject(tmp_path)
    source = '[pipeline.raw.source]\nadapter = "pg"\n'
    config = _config(pg_db, "pg", "wh")
    rp.write_config(config.replace(source, source + 'parallel_reads = 3\nsplit_column = "id"\n'))
    first = rp.run()
    assert first.status == "Success", first.errors
    assert {m.asset_key[-1]: m.rows_copied for m in first.materializations} == {"big": 30001, "empty": 0,
                                                                                "one": 1}

    def same(table: str) -> None:
        src = pg_db.sql(f"SELECT count(*), coalesce(sum(id), 0), count(*) FILTER (WHERE id IS NULL) "
                        f"FROM src__shop.{table}")
        tgt = rp.query(f"SELECT count(*), coalesce(sum(id), 0), count(*) FILTER (WHERE id IS NULL) "
                       f"FROM stg__shop.{table}")
        assert [tuple(int(v) for v in r) for r in tgt] == [tuple(int(v) for v in r) for r in src], table

    for table in ("big", "empty", "one"):
        same(table)
    pg_db.sql("INSERT INTO src__shop.big SELECT g, TIMESTAMP '2026-06-01' + g * INTERVAL '1 s', 'new' "
              "FROM generate_series(30001, 31000) g; INSERT INTO src__shop.big VALUES "
              "(NULL, TIMESTAMP '2026-07-01', 'late, no key')")
    second = rp.run()
    assert second.status == "Success", second.errors
    assert {m.asset_key[-1]: m.rows_copied for m in second.materializations}["big"] == 1001
    same("big")


def test_parallel_reads_must_be_a_positive_integer_or_auto(pg_db: PgDatabase, tmp_path: Path) -> None:
    rp = ReplicationProject(tmp_path)
    source = '[pipeline.raw.source]\nadapter = "pg"\n'
    rp.write_config(_config(pg_db, "pg", "wh").replace(source, source + "parallel_reads = 0\n"))
    with pytest.raises(ConfigError) as caught:
        rp.run()
    assert 'parallel_reads must be a positive integer or "auto" (got 0)' in caught.value.message



# --- the target side: a merge stages the streams (the other strategies scan them in place) ---------


def test_a_merge_across_warehouses_stages_the_arriving_rows(pg_db: PgDatabase, tmp_path: Path) -> None:
    # A merge reads the arriving rows twice (delete, then insert): they land in a stage, not a stream.
    pg_db.sql("CREATE SCHEMA src__shop; CREATE TABLE src__shop.orders (id integer, name text, ts timestamp);"
              "INSERT INTO src__shop.orders SELECT g, 'n' || g, TIMESTAMP '2026-01-01' + g * INTERVAL '1 s' "
              "FROM generate_series(1, 500) g")
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(pg_db, "pg", "wh", extra='strategy = "merge"\nmerge_keys = ["id"]'))
    assert rp.run().status == "Success"
    pg_db.sql("UPDATE src__shop.orders SET name = 'renamed', ts = TIMESTAMP '2026-02-01' WHERE id = 7;"
              "INSERT INTO src__shop.orders VALUES (501, 'new', TIMESTAMP '2026-02-02')")
    second = rp.run()
    assert second.status == "Success", second.errors
    assert second.materializations[0].rows_copied == 2
    assert rp.query("SELECT count(*), max(name) FILTER (WHERE id = 7), max(id) FROM stg__shop.orders") == [
        (501, "renamed", 501)]

