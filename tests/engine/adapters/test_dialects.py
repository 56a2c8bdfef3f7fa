"""The dialect protocol: the copy seam between two warehouses, the ANSI defaults a new warehouse inherits
(run for real on DuckDB with DuckDB's shortcuts switched off), and capabilities that refuse what a
warehouse cannot do."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.adapters.base import TableName
from rocky_engine.adapters.dialect import Capabilities, Dialect, copy_item
from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter
from rocky_engine.adapters.duckdb.dialect import DIALECT as DUCKDB
from rocky_engine.adapters.duckdb.dialect import DuckDbDialect
from rocky_engine.adapters.postgres.dialect import DIALECT as POSTGRES
from rocky_engine.adapters.sql_types import HEX_TEXT, TEXT, SqlType
from rocky_engine.errors import AdapterError
from rocky_engine.models.model import Strategy
from rocky_engine.run.materialize import materialize

# ---------------------------------------------------------------------------------- the copy seam


@pytest.mark.parametrize(
    ("source_type", "item", "wire"),
    [
        ("integer", '"c"', SqlType("int", 32)),
        ("character varying(20)", '"c"', SqlType("string")),
        ("numeric(10,2)", '"c"', SqlType("decimal", 10, 2)),
        ("numeric", 'CAST("c" AS double precision) AS "c"', SqlType("float", 64)),
        ("numeric(50,2)", 'CAST("c" AS double precision) AS "c"', SqlType("float", 64)),
        ("uuid", 'CAST("c" AS text) AS "c"', TEXT),
        ("jsonb", 'CAST("c" AS text) AS "c"', TEXT),
        ("interval", 'CAST("c" AS text) AS "c"', TEXT),
        ("integer[]", 'CAST("c" AS text) AS "c"', TEXT),
        ("bytea", '"c"', SqlType("blob")),
        ("timestamp with time zone", '"c"', SqlType("timestamptz")),
    ],
)
def test_postgres_to_duckdb_casts_what_the_row_reader_cannot_carry(
    source_type: str, item: str, wire: SqlType
) -> None:
    assert copy_item("c", source_type, POSTGRES, DUCKDB) == (item, wire)


@pytest.mark.parametrize(
    ("source_type", "item", "wire"),
    [
        ("INTEGER", '"c"', SqlType("int", 32)),
        ("TINYINT", '"c"', SqlType("int", 8)),
        ("VARCHAR", '"c"', SqlType("string")),
        ("DECIMAL(18,3)", '"c"', SqlType("decimal", 18, 3)),
        ("HUGEINT", 'CAST("c" AS DECIMAL(38,0)) AS "c"', SqlType("decimal", 38, 0)),
        ("UUID", 'CAST("c" AS VARCHAR) AS "c"', TEXT),
        ("JSON", 'CAST("c" AS VARCHAR) AS "c"', TEXT),
        ("INTEGER[]", 'CAST("c" AS VARCHAR) AS "c"', TEXT),
        ("STRUCT(a INTEGER)", 'CAST("c" AS VARCHAR) AS "c"', TEXT),
        ("BLOB", "CASE WHEN \"c\" IS NULL THEN NULL ELSE '\\x' || lower(hex(\"c\")) END AS \"c\"", HEX_TEXT),
    ],
)
def test_duckdb_to_postgres_sends_text_where_the_csv_load_needs_it(
    source_type: str, item: str, wire: SqlType
) -> None:
    assert copy_item("c", source_type, DUCKDB, POSTGRES) == (item, wire)


def test_postgres_to_postgres_sends_binary_as_hex_text() -> None:
    assert copy_item("c", "bytea", POSTGRES, POSTGRES) == ("'\\x' || encode(\"c\", 'hex') AS \"c\"", HEX_TEXT)
    assert copy_item("c", "uuid", POSTGRES, POSTGRES) == ('CAST("c" AS text) AS "c"', TEXT)


@pytest.mark.parametrize("source_type", ["HUGEINT", "UUID", "BLOB", "INTEGER[]", "DECIMAL(38,10)", "JSON"])
def test_duckdb_to_duckdb_casts_nothing(source_type: str) -> None:
    item, wire = copy_item("c", source_type, DUCKDB, DUCKDB)
    assert item == '"c"'
    assert wire == DUCKDB.parse_type(source_type)


def test_a_dialect_that_cannot_send_hex_refuses_binary_into_a_csv_loader() -> None:
    class Plain(Dialect):
        name = "plain"

        def render_type(self, t: SqlType) -> str:
            return t.family.upper()

    with pytest.raises(AdapterError, match="cannot send binary values as hex text") as caught:
        copy_item("payload", "BLOB", Plain(), POSTGRES)
    assert caught.value.failure_kind == "query-rejected"


# ---------------------------------------------------------------------------------- ANSI defaults


class AnsiOnDuckDb(DuckDbDialect):
    """DuckDB with its shortcuts off: every operation takes the base class's ANSI path."""

    capabilities = dataclasses.replace(
        DUCKDB.capabilities, replace_table_statement=False, insert_by_name=False
    )


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[DuckDbAdapter]:
    adapter = DuckDbAdapter("wh", tmp_path / "wh.duckdb")
    adapter.execute("CREATE SCHEMA m")
    adapter.execute("CREATE TABLE src AS SELECT range AS id, range % 3 AS part, 'v' || range AS v, "
                    "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range(10)")
    yield adapter
    adapter.close()


def _table(name: str) -> TableName:
    return TableName("wh", "m", name, f'"wh"."m"."{name}"')


@pytest.mark.parametrize("dialect", [DUCKDB, AnsiOnDuckDb()], ids=["duckdb", "ansi"])
def test_every_strategy_gives_the_same_rows_through_the_ansi_defaults(
    warehouse: DuckDbAdapter, dialect: Dialect
) -> None:
    t = _table("t")
    select = "SELECT * FROM src"
    rows = materialize(warehouse, dialect, Strategy(type="full_refresh"), t, select, exists_as=None)
    assert rows.rows == 10
    warehouse.execute("INSERT INTO src VALUES (10, 1, 'v10', TIMESTAMP '2026-01-02')")
    inc = Strategy(type="incremental", timestamp_column="ts")
    done = materialize(warehouse, dialect, inc, t, select, exists_as="table")
    assert (done.rows, done.watermark) == (1, "2026-01-02T00:00:00")
    warehouse.execute("UPDATE src SET v = 'changed' WHERE id IN (1, 2)")
    merge = Strategy(type="merge", unique_key=("id",), update_columns=("v",))
    merged = materialize(warehouse, dialect, merge, t, "SELECT * FROM src WHERE id < 3", exists_as="table")
    assert merged.rows == 3
    warehouse.execute("DELETE FROM src WHERE part = 0")
    di = Strategy(type="delete_insert", partition_by=("part",))
    materialize(warehouse, dialect, di, t, "SELECT * FROM src WHERE part = 1", exists_as="table")
    assert warehouse.query("SELECT count(*), count(*) FILTER (WHERE v = 'changed') FROM m.t") == [(11, 2)]
    assert warehouse.query("SELECT count(*) FROM m.t WHERE part = 1") == [(4,)]
    # full refresh over a view, then a view over a table: both swaps leave one relation of the new kind
    materialize(warehouse, dialect, Strategy(type="view"), t, select, exists_as="table")
    assert _kinds(warehouse) == {"t": "view"}
    materialize(warehouse, dialect, Strategy(type="full_refresh"), t, select, exists_as="view")
    assert _kinds(warehouse) == {"t": "table"}
    assert warehouse.query("SELECT count(*) FROM m.t") == [(7,)]


def _kinds(adapter: DuckDbAdapter) -> dict[str, str]:
    return {r.name: r.kind for r in adapter.list_relations() if r.schema == "m"}


def test_the_ansi_full_refresh_is_atomic(warehouse: DuckDbAdapter) -> None:
    dialect = AnsiOnDuckDb()
    t = _table("t")
    dialect.create_or_replace_as_select(warehouse, t, "SELECT * FROM src", exists_as=None)
    with pytest.raises(AdapterError):
        dialect.create_or_replace_as_select(
            warehouse, t, "SELECT CAST('x' AS INTEGER) AS id", exists_as="table"
        )
    assert warehouse.query("SELECT count(*) FROM m.t") == [(10,)]


def test_a_warehouse_without_merge_refuses_the_merge_strategy(warehouse: DuckDbAdapter) -> None:
    class NoMerge(DuckDbDialect):
        capabilities = dataclasses.replace(DUCKDB.capabilities, merge=False)

    t = _table("t")
    DUCKDB.create_or_replace_as_select(warehouse, t, "SELECT * FROM src")
    merge = Strategy(type="merge", unique_key=("id",))
    with pytest.raises(AdapterError, match="has no MERGE statement") as caught:
        materialize(warehouse, NoMerge(), merge, t, "SELECT * FROM src", exists_as="table")
    assert caught.value.failure_kind == "query-rejected"
    assert caught.value.hint == "use strategy delete_insert, or full_refresh"


def test_batched_watermarks_come_back_in_order_as_text(warehouse: DuckDbAdapter) -> None:
    warehouse.execute("CREATE TABLE m.empty (ts TIMESTAMP)")
    marks = DUCKDB.read_watermarks(warehouse, [("src", "ts"), ("m.empty", "ts"), ("src", "ts")])
    assert marks == ["2026-01-01T00:00:09", None, "2026-01-01T00:00:09"]
    assert DUCKDB.read_watermark(warehouse, "m.empty", "ts") is None
    with pytest.raises(AdapterError):
        DUCKDB.read_watermarks(warehouse, [("src", "ts"), ("m.missing", "ts")])


def test_reading_local_files_is_a_capability(tmp_path: Path) -> None:
    assert DUCKDB.capabilities.reads_local_files and not POSTGRES.capabilities.reads_local_files
    assert DUCKDB.scan_files("parquet", ["/a.parquet", "/b'.parquet"], union_by_name=True) == (
        "read_parquet(['/a.parquet', '/b''.parquet'], union_by_name = true)"
    )
    jsonl = DUCKDB.scan_files("jsonl", ["/x.jsonl"])
    assert jsonl == "read_json_auto('/x.jsonl', format = 'newline_delimited')"
    with pytest.raises(AdapterError, match="cannot read local files"):
        POSTGRES.scan_files("csv", ["/x.csv"])


def test_capabilities_name_what_each_warehouse_can_do() -> None:
    assert DUCKDB.capabilities == Capabilities(
        merge=True, replace_table_statement=True, transactional_ddl=True, insert_by_name=True,
        single_catalog=False, reads_local_files=True,
    )
    assert POSTGRES.capabilities.single_catalog and POSTGRES.capabilities.atomic_full_refresh
    assert not POSTGRES.capabilities.replace_table_statement
    spark_like = Capabilities(merge=False, replace_table_statement=False, transactional_ddl=False)
    assert not spark_like.atomic_full_refresh


def test_an_abandoned_duckdb_stream_frees_its_session_for_the_retry() -> None:
    adapter = DuckDbAdapter("wh", None)
    session = adapter.session()
    big = "SELECT range FROM range(1000000)"
    with pytest.raises(RuntimeError), session.read_arrow(big, [], []) as reader:
        next(iter(reader))
        raise RuntimeError("the target failed while loading")
    assert session.query("SELECT 1") == [(1,)]
    session.close()
    adapter.close()


class Counting:
    """A session that records every statement it is given (DESIGN "Performance": count them)."""

    def __init__(self, inner: DuckDbAdapter) -> None:
        self.inner = inner
        self.statements: list[str] = []

    def execute(self, sql: str, params: Any = None) -> int | None:
        self.statements.append(sql)
        return self.inner.execute(sql, params)

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        self.statements.append(sql)
        return self.inner.query(sql, params)

    def transaction(self) -> Any:
        return self.inner.transaction()


def test_duckdb_builds_a_model_in_one_statement(warehouse: DuckDbAdapter) -> None:
    counting = Counting(warehouse)
    t = _table("t")
    materialize(counting, DUCKDB, Strategy(type="full_refresh"), t, "SELECT * FROM src", exists_as="table")
    assert counting.statements == ['CREATE OR REPLACE TABLE "wh"."m"."t" AS SELECT * FROM src']
    counting.statements.clear()
    inc = Strategy(type="incremental", timestamp_column="ts")
    materialize(counting, DUCKDB, inc, t, "SELECT * FROM src", exists_as="table")
    assert [s.split(" ")[0] for s in counting.statements] == ["INSERT", "SELECT"]  # the rows, the watermark
