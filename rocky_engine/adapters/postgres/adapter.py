"""PostgreSQL, the server warehouse: one autocommit connection per session, reconnecting after a loss.

PostgreSQL has one catalog per connection: the catalog is the database name and ``qualified`` emits
``"schema"."table"``. A session whose connection died (server restart, ``pg_terminate_backend``) opens a
new one on its next statement, so the statement retrier can simply call again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from rocky_engine.adapters.base import (
    CatalogTable,
    Column,
    Maintenance,
    Relation,
    TableColumns,
    columns_by_table,
    quote_ident,
    row_estimate,
)
from rocky_engine.adapters.failure import classify, first_line
from rocky_engine.adapters.postgres.connection import Endpoint, PostgresAdapterError, pyformat
from rocky_engine.adapters.postgres.dialect import DIALECT
from rocky_engine.config.adapters import PostgresAdapterConfig

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.adapters.sql_types import SqlType

#: relkind -> Relation.kind for the relations a pipeline can read or replace
_RELKINDS = {"r": "table", "p": "table", "f": "table", "v": "view"}


class PostgresSession:
    """One connection, opened lazily and reopened after it was lost."""

    def __init__(self, endpoint: Endpoint, conn: psycopg.Connection[tuple[Any, ...]] | None = None) -> None:
        self._endpoint = endpoint
        self._conn = conn
        self._lock = threading.Lock()  # guards _conn and _ranges against interrupt() from another thread
        #: the sessions of the parallel range reads in flight (read_arrow_ranges)
        self._ranges: list[PostgresSession] = []
        #: connection attempts by this session so far, failed ones included
        self.connects = 0 if conn is None else 1

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self.connects += 1
            conn = self._endpoint.connect()
            with self._lock:
                self._conn = conn
        return conn

    def reset(self) -> None:
        """Drop the connection; the next statement opens a new one (the retrier calls this)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        conn = self._connection()
        try:
            cur = conn.execute(pyformat(sql) if params is not None else sql, params)
        except psycopg.Error as exc:
            raise self._error(exc) from None
        return cur.rowcount if cur.rowcount >= 0 else None

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        conn = self._connection()
        try:
            cur = conn.execute(pyformat(sql) if params is not None else sql, params)
            return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise self._error(exc) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN/COMMIT on this connection; nested use becomes a savepoint."""
        conn = self._connection()
        try:
            with conn.transaction():
                yield
        except psycopg.Error as exc:
            raise self._error(exc) from None

    @contextmanager
    def read_arrow(
        self, sql: str, params: Sequence[Any], columns: Sequence[tuple[str, SqlType]]
    ) -> Iterator[Any]:
        from rocky_engine.adapters.postgres.copy_reader import read_csv_batches

        try:
            with read_csv_batches(self._connection(), sql, params, columns) as reader:
                yield reader
        except psycopg.Error as exc:
            raise self._error(exc) from None

    @contextmanager
    def read_arrow_ranges(
        self, statements: Sequence[tuple[str, Sequence[Any]]], columns: Sequence[tuple[str, SqlType]]
    ) -> Iterator[list[Any]]:
        # The first range reads on this session, every other on a connection of its own (a COPY holds
        # its connection until the stream ends); interrupt() cancels them all.
        with ExitStack() as stack:
            readers: list[Any] = []
            for i, (sql, params) in enumerate(statements):
                session = self
                if i:
                    session = PostgresSession(self._endpoint)
                    stack.callback(session.close)
                    with self._lock:
                        self._ranges.append(session)
                    stack.callback(self._forget, session)
                readers.append(stack.enter_context(session.read_arrow(sql, params, columns)))
            yield readers

    def _forget(self, session: PostgresSession) -> None:
        with self._lock:
            self._ranges.remove(session)

    @contextmanager
    def scan_arrow(
        self, name: str, columns: Sequence[tuple[str, str]], readers: Sequence[Any], *, once: bool
    ) -> Iterator[str]:
        from rocky_engine.adapters.postgres.arrow import load_batches

        conn = self._connection()
        try:
            load_batches(conn, name, columns, readers)
        except psycopg.Error as exc:
            raise self._error(exc) from None
        try:
            yield quote_ident(name)
        finally:
            try:
                conn.execute(f"DROP TABLE IF EXISTS {quote_ident(name)}")
            except psycopg.Error:
                pass  # a temporary table dies with its session anyway

    def interrupt(self) -> None:
        with self._lock:
            conn = self._conn
            ranges = list(self._ranges)
        for session in ranges:
            session.interrupt()
        if conn is None or conn.closed:
            return
        try:
            conn.cancel_safe(timeout=5.0)
        except (psycopg.Error, OSError):
            pass

    def close(self) -> None:
        self.reset()

    def _error(self, exc: psycopg.Error) -> PostgresAdapterError:
        message = self._endpoint.mask(first_line(str(exc)))
        if not message:
            message = type(exc).__name__
        return PostgresAdapterError(message, failure_kind=classify(exc), sqlstate=exc.sqlstate)


class PostgresAdapter(PostgresSession):
    """A PostgreSQL database as a warehouse; its own connection is autocommit."""

    type = "postgres"
    default_schema = "public"
    dialect: Dialect = DIALECT

    def __init__(self, name: str, endpoint: Endpoint, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        super().__init__(endpoint, conn)
        self.name = name
        self.catalog = endpoint.dbname

    @classmethod
    def connect(cls, name: str, cfg: PostgresAdapterConfig) -> PostgresAdapter:
        """Open the adapter's connection now, so a wrong host or password fails before any work.

        Raises:
            AdapterError: the server cannot be reached, refuses the login, or the database is missing.
        """
        endpoint = Endpoint(name, cfg)
        return cls(name, endpoint, endpoint.connect())

    def session(self) -> PostgresSession:
        """A new connection (opened on first use) for one worker thread."""
        return PostgresSession(self._endpoint)

    def quote(self, identifier: str) -> str:
        return self.dialect.quote(identifier)

    def qualified(self, schema: str, table: str, catalog: str | None = None) -> str:
        # One database per connection: a catalog part would be rejected for any other database.
        return f"{quote_ident(schema)}.{quote_ident(table)}"

    def describe(self, schema: str, table: str, catalog: str | None = None) -> list[Column]:
        # format_type keeps length/precision ("character varying(20)"), which drift checks compare.
        rows = self.query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            [schema, table],
        )
        return [Column(str(r[0]), str(r[1]), bool(r[2])) for r in rows]

    def table_exists(self, schema: str, table: str, catalog: str | None = None) -> bool:
        rows = self.query(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relname = ? AND c.relkind IN ('r', 'p', 'f', 'v')",
            [schema, table],
        )
        return bool(rows)

    def list_schemas(self, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname <> 'information_schema' ORDER BY 1"
        )
        return [str(r[0]) for r in rows]

    def list_tables(self, schema: str, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind IN ('r', 'p', 'f') ORDER BY 1",
            [schema],
        )
        return [str(r[0]) for r in rows]

    def catalog_tables(self, catalog: str) -> list[CatalogTable]:
        rows = self.query(
            "SELECT n.nspname, c.relname, c.reltuples::bigint FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%' "
            "ORDER BY 1, 2"
        )
        return [CatalogTable(str(r[0]), str(r[1]), row_estimate(r[2])) for r in rows]

    def read_columns(self, catalog: str, schemas: Sequence[str]) -> TableColumns:
        if not schemas:
            return {}
        names = sorted(schemas)
        marks = ", ".join("?" for _ in names)
        rows = self.query(
            "SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p', 'f', 'v', 'm') AND a.attnum > 0 AND NOT a.attisdropped "
            f"AND n.nspname IN ({marks}) ORDER BY n.nspname, c.relname, a.attnum",
            names,
        )
        return columns_by_table(rows)

    def maintenance(self) -> Maintenance | None:
        return None  # the server checkpoints on its own

    def list_relations(self, catalog: str | None = None) -> list[Relation]:
        rows = self.query(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p', 'f', 'v') AND n.nspname NOT LIKE 'pg\\_%' "
            "AND n.nspname <> 'information_schema'"
        )
        return [Relation(self.catalog, str(r[0]), str(r[1]), _RELKINDS[str(r[2])]) for r in rows]

    def ensure_schema(self, schema: str, catalog: str | None = None) -> bool:
        if schema in self.list_schemas(catalog):
            return False
        self.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        return True

