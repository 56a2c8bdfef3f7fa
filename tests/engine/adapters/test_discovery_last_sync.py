"""Warehouse discovery reports ``last_sync_at`` = the newest ``timestamp_column`` value of each source's
tables, read in one batched query per discover, on a real DuckDB file and a real PostgreSQL server.

The adapters are the real ones; a subclass only counts the statements they run (each still runs), so the
test sees that adding tables adds no statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.adapters.discovery import WarehouseDiscovery
from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter
from rocky_engine.adapters.postgres.adapter import PostgresAdapter
from rocky_engine.config.adapters import PostgresAdapterConfig
from rocky_engine.config.pipelines import ReplicationPipeline
from tests.fixtures.postgres import PgDatabase

PIPELINE = ReplicationPipeline.model_validate({
    "type": "replication", "timestamp_column": "_synced",
    "source": {"schema_pattern": {"prefix": "src", "components": ["source"]}},
    "target": {"catalog_template": "wh", "schema_template": "stg__{source}"},
})

SETUP = [
    "CREATE SCHEMA src__shop",
    "CREATE TABLE src__shop.orders (id INT, _synced TIMESTAMP)",
    "INSERT INTO src__shop.orders VALUES (1, TIMESTAMP '2026-05-01 10:00:00'), "
    "(2, TIMESTAMP '2026-05-02 09:30:00')",
    "CREATE TABLE src__shop.customers (id INT, _SYNCED TIMESTAMP)",
    "INSERT INTO src__shop.customers VALUES (1, TIMESTAMP '2026-05-02 11:15:00')",
    "CREATE SCHEMA src__crm",  # a source whose tables have no such column: no clock
    "CREATE TABLE src__crm.leads (id INT)",
    "CREATE SCHEMA src__empty",  # the column, but no rows yet: no clock either
    "CREATE TABLE src__empty.events (id INT, _synced TIMESTAMP)",
    "CREATE SCHEMA src__text",  # a text column of that name is not a clock
    "CREATE TABLE src__text.notes (id INT, _synced VARCHAR(40))",
    "INSERT INTO src__text.notes VALUES (1, '2099-01-01')",
]
MORE_TABLES = [f"CREATE TABLE src__shop.extra_{i} (id INT, _synced TIMESTAMP)" for i in range(5)]


class CountingDuckDb(DuckDbAdapter):
    statements = 0

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        type(self).statements += 1
        return super().query(sql, params)


class CountingPostgres(PostgresAdapter):
    statements = 0

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        type(self).statements += 1
        return super().query(sql, params)


def discover(adapter: Any) -> tuple[dict[str, datetime | None], int]:
    type(adapter).statements = 0
    outcome = WarehouseDiscovery(adapter).discover(PIPELINE)
    return {s.id: s.last_sync_at for s in outcome.sources}, type(adapter).statements


EXPECTED = {
    "src__shop": datetime(2026, 5, 2, 11, 15, tzinfo=UTC), "src__crm": None, "src__empty": None,
    "src__text": None,
}


def test_duckdb_last_sync_at_in_one_batched_query(tmp_path: Path) -> None:
    adapter = CountingDuckDb("wh", tmp_path / "wh.duckdb")
    try:
        for sql in SETUP:
            adapter.execute(sql)
        found, statements = discover(adapter)
        assert found == EXPECTED
        for sql in MORE_TABLES:
            adapter.execute(sql)
        found_again, statements_again = discover(adapter)
        assert found_again == EXPECTED
        # the table listing, the columns of the matching schemas, and one MAX() batch: whatever the tables
        assert statements == statements_again == 3
    finally:
        adapter.close()


@pytest.mark.services
def test_postgres_last_sync_at_in_one_batched_query(pg_db: PgDatabase) -> None:
    for sql in SETUP:
        pg_db.sql(sql)
    server = pg_db.server
    cfg = PostgresAdapterConfig.model_validate({
        "type": "postgres", "host": server.host, "port": server.port, "user": server.user,
        "password": server.password, "dbname": pg_db.name,
    })
    adapter = CountingPostgres.connect("wh", cfg)
    try:
        # PostgreSQL folds the unquoted _SYNCED to _synced; both tables count
        found, statements = discover(adapter)
        assert found == EXPECTED
        for sql in MORE_TABLES:
            pg_db.sql(sql)
        found_again, statements_again = discover(adapter)
        assert found_again == EXPECTED and statements == statements_again == 3
    finally:
        adapter.close()


def test_a_failing_max_query_is_a_warning_not_a_failed_discover(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    class Refusing(DuckDbAdapter):
        def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
            if "UNION ALL" in sql or sql.startswith("SELECT 'src__"):
                return super().query("SELECT * FROM no_such_table")  # a real warehouse error
            return super().query(sql, params)

    adapter = Refusing("wh", tmp_path / "wh.duckdb")
    try:
        for sql in SETUP:
            adapter.execute(sql)
        import logging

        logging.getLogger("rocky").propagate = True
        try:
            with caplog.at_level(logging.WARNING, logger="rocky.discover"):
                outcome = WarehouseDiscovery(adapter).discover(PIPELINE)
        finally:
            logging.getLogger("rocky").propagate = False
        assert [s.last_sync_at for s in outcome.sources] == [None, None, None, None]
        assert "last_sync_at not read (MAX(_synced) of the source tables)" in caplog.text
    finally:
        adapter.close()
