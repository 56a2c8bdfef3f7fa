"""Replication across warehouses on a real PostgreSQL server: PostgreSQL -> DuckDB and DuckDB -> PostgreSQL,
rows streamed through Arrow (COPY on the PostgreSQL side), incremental passes and drift."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rocky_engine.errors import ConfigError
from tests.engine.replication.conftest import ReplicationProject
from tests.fixtures.postgres import PgDatabase

pytestmark = [pytest.mark.services, pytest.mark.slow]


def _config(
    pg: PgDatabase, source: str, target: str, *, extra: str = "", catalog: str = "wh",
    wh: PgDatabase | None = None,
) -> str:
    """``pg`` and ``wh`` adapters: ``wh`` is a DuckDB file, or the PostgreSQL database ``wh`` when given."""
    kind, where = ("postgres", f'dsn = "{wh.conninfo}"') if wh else ("duckdb", 'path = "wh.duckdb"')
    return textwrap.dedent(f"""\
        [adapter.pg]
        type = "postgres"
        dsn = "{pg.conninfo}"

        [adapter.wh]
        type = "{kind}"
        {where}

        [pipeline.raw]
        type = "replication"
        timestamp_column = "ts"
        {extra}

        [pipeline.raw.source]
        adapter = "{source}"

        [pipeline.raw.source.schema_pattern]
        prefix = "src"
        separator = "__"
        components = ["source"]

        [pipeline.raw.target]
        adapter = "{target}"
        catalog_template = "{catalog}"
        schema_template = "stg__{{source}}"
    """)


def test_postgres_to_duckdb(pg_db: PgDatabase, tmp_path: Path) -> None:
    pg_db.sql(
        "CREATE SCHEMA src__shop; CREATE TABLE src__shop.orders (id integer, name varchar(20), "
        "amount numeric(10,2), ratio numeric, flag boolean, d date, ts timestamp, tz timestamptz, u uuid, "
        "j jsonb, b bytea, arr integer[], note text);"
        "INSERT INTO src__shop.orders SELECT g, 'n' || g, g * 1.25, g / 3.0, g % 2 = 0, "
        "DATE '2026-01-01' + g, TIMESTAMP '2026-01-01' + g * INTERVAL '1 second', "
        "TIMESTAMPTZ '2026-01-01 00:00+00' + g * INTERVAL '1 hour', "
        "md5(g::text)::uuid, jsonb_build_object('g', g), decode('ff00', 'hex'), ARRAY[g, g + 1], NULL "
        "FROM generate_series(1, 120000) g"
    )
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(pg_db, "pg", "wh"))
    first = rp.run()
    assert first.status == "Success", first.errors
    m = first.materializations[0]
    assert m.asset_key == ["postgres", "shop", "orders"]
    assert m.rows_copied == 120000
    assert m.metadata.watermark == "2026-01-02T09:20:00Z"  # UTC on the wire; 120000 s after the first
    types = dict(rp.query("SELECT column_name, data_type FROM information_schema.columns "
                          "WHERE table_schema = 'stg__shop' AND table_name = 'orders'"))
    assert types == {
        "id": "INTEGER", "name": "VARCHAR", "amount": "DECIMAL(10,2)", "ratio": "DOUBLE", "flag": "BOOLEAN",
        "d": "DATE", "ts": "TIMESTAMP", "tz": "TIMESTAMP WITH TIME ZONE", "u": "UUID", "j": "JSON",
        "b": "BLOB", "arr": "VARCHAR", "note": "VARCHAR",
    }
    row = rp.query("SELECT id, name, amount::VARCHAR, flag, d::VARCHAR, u::VARCHAR, j::VARCHAR, b, arr, note "
                   "FROM stg__shop.orders WHERE id = 2")
    assert row == [(2, "n2", "2.50", True, "2026-01-03", "c81e728d-9d4c-2f63-6f06-7f89cc14862c", '{"g": 2}',
                    b"\xff\x00", "{2,3}", None)]
    assert rp.query("SELECT epoch(tz) FROM stg__shop.orders WHERE id = 1") == [(1767229200.0,)]

    pg_db.sql("INSERT INTO src__shop.orders (id, name, ts) VALUES (200000, 'new', TIMESTAMP '2026-03-01')")
    pg_db.sql("ALTER TABLE src__shop.orders ADD COLUMN extra integer, ALTER COLUMN id TYPE bigint, "
              "ALTER COLUMN name TYPE varchar(40)")
    second = rp.run()
    assert second.status == "Success", second.errors
    assert second.materializations[0].rows_copied == 1
    assert [(a.action, a.reason) for a in second.drift.actions_taken] == [
        ("alter_column_type", "column 'id' widened INTEGER -> BIGINT"),
        ("add_column", "column 'extra' (INTEGER) is new in the source"),
    ]
    assert rp.count("stg__shop.orders") == 120001

    pg_db.sql("ALTER TABLE src__shop.orders ALTER COLUMN note TYPE integer USING 0")
    third = rp.run()
    assert [a.action for a in third.drift.actions_taken] == ["drop_and_recreate"]
    assert third.materializations[0].rows_copied == 120001
    assert rp.count("stg__shop.orders") == 120001


def test_duckdb_to_postgres(pg_db: PgDatabase, tmp_path: Path) -> None:
    rp = ReplicationProject(tmp_path)
    rp.write_config(_config(pg_db, "wh", "pg", catalog=pg_db.name, extra="""
        metadata_columns = [{ name = "_loaded_by", type = "text", value = "'rocky'" }]
    """))
    rp.sql(
        "CREATE SCHEMA src__shop",
        "CREATE TABLE src__shop.orders AS SELECT range::INTEGER AS id, 'n' || range AS name, "
        "CASE WHEN range % 10 = 0 THEN '' WHEN range % 10 = 1 THEN NULL ELSE 'x,\"y\"' END AS tricky, "
        "(range * 1.25)::DECIMAL(10,2) AS amount, range::HUGEINT AS huge, uuid() AS u, "
        "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts, TIMESTAMPTZ '2026-01-01 00:00:00+00' AS tz, "
        "'\\xAB'::BLOB AS b, [range, range] AS arr FROM range(80000)",
    )
    first = rp.run()
    assert first.status == "Success", first.errors
    assert first.materializations[0].rows_copied == 80000
    assert first.materializations[0].metadata.target_table_full_name == f"{pg_db.name}.stg__shop.orders"
    counts = pg_db.sql(
        "SELECT count(*), count(*) FILTER (WHERE tricky = ''), count(*) FILTER (WHERE tricky IS NULL), "
        "count(DISTINCT _loaded_by) FROM stg__shop.orders"
    )
    assert counts == [(80000, 8000, 8000, 1)]
    row = pg_db.sql("SELECT tricky, amount::text, huge::text, b, arr, tz = TIMESTAMPTZ '2026-01-01 00:00+00' "
                    "FROM stg__shop.orders WHERE id = 2")
    assert row == [('x,"y"', "2.50", "2", b"\xab", "[2, 2]", True)]
    types = dict(pg_db.sql("SELECT column_name, data_type FROM information_schema.columns "
                           "WHERE table_schema = 'stg__shop' AND table_name = 'orders'"))
    assert types["amount"] == "numeric" and types["u"] == "uuid" and types["arr"] == "text"

    rp.sql("INSERT INTO src__shop.orders (id, name, ts) SELECT range, 'late', TIMESTAMP '2026-06-01' "
           "FROM range(80000, 80010)")
    rp.sql("ALTER TABLE src__shop.orders ADD COLUMN extra DOUBLE")
    second = rp.run()
    assert second.status == "Success", second.errors
    assert second.materializations[0].rows_copied == 10
    assert [a.action for a in second.drift.actions_taken] == ["add_column"]
    assert pg_db.sql("SELECT count(*) FROM stg__shop.orders") == [(80010,)]
    assert second.materializations[0].metadata.watermark == "2026-06-01T00:00:00Z"


def test_inside_one_postgres_database(pg_db: PgDatabase, tmp_path: Path) -> None:
    pg_db.sql(
        "CREATE SCHEMA src__shop; CREATE TABLE src__shop.orders (id integer, name varchar(10), ts timestamp);"
        "INSERT INTO src__shop.orders SELECT g, 'n' || g, TIMESTAMP '2026-01-01' + g * INTERVAL '1 second' "
        "FROM generate_series(1, 1000) g"
    )
    rp = ReplicationProject(tmp_path)
    merge = 'strategy = "merge"\nmerge_keys = ["id"]'
    rp.write_config(_config(pg_db, "pg", "pg", catalog=pg_db.name, extra=merge))
    first = rp.run()
    assert first.status == "Success", first.errors
    assert first.materializations[0].rows_copied == 1000
    pg_db.sql("ALTER TABLE src__shop.orders ALTER COLUMN name TYPE varchar(20), ADD COLUMN extra integer;"
              "UPDATE src__shop.orders SET name = 'renamed', ts = TIMESTAMP '2026-02-01' WHERE id = 7")
    second = rp.run()
    assert second.status == "Success", second.errors
    assert second.materializations[0].rows_copied == 1
    assert [(a.action, a.reason) for a in second.drift.actions_taken] == [
        ("alter_column_type", "column 'name' widened character varying(10) -> varchar(20)"),
        ("add_column", "column 'extra' (integer) is new in the source"),
    ]
    result = pg_db.sql("SELECT count(*), max(name) FILTER (WHERE id = 7) FROM stg__shop.orders")
    assert result == [(1000, "renamed")]


def test_postgres_to_another_postgres_database_keeps_binary_and_typed_text(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    # Two databases are two warehouses: rows travel through Arrow and COPY, so bytea must reach the CSV in
    # its hex text form (raw bytes with a NUL, a backslash or invalid UTF-8 would not load).
    target = PgDatabase(pg_db.server, pg_db.server.create_database(f"{pg_db.name}_t"))
    try:
        pg_db.sql(
            "CREATE SCHEMA src__shop; CREATE TABLE src__shop.blobs (id integer, b bytea, u uuid, j jsonb, "
            "big numeric, ts timestamp);"
            "INSERT INTO src__shop.blobs SELECT g, decode('00ff5c78' || lpad(to_hex(g), 4, '0'), 'hex'), "
            "md5(g::text)::uuid, jsonb_build_object('g', g), g::numeric * 1e30, "
            "TIMESTAMP '2026-01-01' + g * INTERVAL '1 second' FROM generate_series(1, 3000) g;"
            "INSERT INTO src__shop.blobs VALUES (0, NULL, NULL, NULL, NULL, TIMESTAMP '2026-01-01')"
        )
        rp = ReplicationProject(tmp_path)
        rp.write_config(_config(pg_db, "pg", "wh", catalog=target.name, wh=target))
        first = rp.run()
        assert first.status == "Success", first.errors
        assert first.materializations[0].rows_copied == 3001
        same = target.sql(
            "SELECT count(*) FILTER (WHERE b = decode('00ff5c78' || lpad(to_hex(id), 4, '0'), 'hex')), "
            "count(*) FILTER (WHERE b IS NULL), count(*) FILTER (WHERE u = md5(id::text)::uuid), "
            "count(*) FILTER (WHERE j = jsonb_build_object('g', id)) FROM stg__shop.blobs"
        )
        assert same == [(3000, 1, 3000, 3000)]
        types = dict(target.sql("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_schema = 'stg__shop' AND table_name = 'blobs'"))
        assert types == {"id": "integer", "b": "bytea", "u": "uuid", "j": "jsonb", "big": "numeric",
                         "ts": "timestamp without time zone"}
    finally:
        pg_db.server.drop_database(target.name)


def test_a_postgres_source_is_one_database(pg_db: PgDatabase, tmp_path: Path) -> None:
    # A single-catalog warehouse (capabilities.single_catalog) refuses another source catalog by name,
    # instead of discovering nothing.
    rp = ReplicationProject(tmp_path)
    source = '[pipeline.raw.source]\nadapter = "pg"\n'
    config = _config(pg_db, "pg", "wh")
    assert source in config
    rp.write_config(config.replace(source, source + 'catalog = "elsewhere"\n'))
    with pytest.raises(ConfigError) as caught:
        rp.run()
    assert caught.value.message == (
        f"source.catalog: source catalog 'elsewhere' is not the database of adapter 'pg' ('{pg_db.name}')"
    )
    assert caught.value.hint == (
        "a postgres adapter reads one database: point [source] at that database's adapter"
    )
