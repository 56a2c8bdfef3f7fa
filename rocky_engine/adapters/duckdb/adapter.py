"""DuckDB, the embedded warehouse: one connection per run, one cursor per worker thread.

DuckDB does not parallelise small statements internally, so concurrency comes from several cursors of one
connection, each running its own statement (DESIGN.md "Performance"). The catalog name is the file stem of
``path`` (``poc.duckdb`` is catalog ``poc``), or ``memory`` for an in-memory database.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from rocky_engine.adapters.base import (
    ARROW_BATCH_ROWS,
    CatalogTable,
    Column,
    Maintenance,
    Relation,
    TableColumns,
    columns_by_table,
    quote_ident,
    row_estimate,
)
from rocky_engine.adapters.duckdb import checkpoint
from rocky_engine.adapters.duckdb.dialect import DIALECT
from rocky_engine.adapters.failure import classify, first_line
from rocky_engine.errors import AdapterError

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.adapters.sql_types import SqlType

#: schemas that are never replication sources
_SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "pg_toast"})

_LOCK_PID = re.compile(r"PID (\d+)")


#: A copied table's rows have no order (its SELECT has no ORDER BY), and DuckDB writes one arriving stream
#: with all its threads only when it need not keep the stream's order: measured on the 2M-row
#: PostgreSQL -> DuckDB first pass (bench/replication_peers.md, phase 4) the INSERT's own time falls
#: from 1.40 s to 0.75 s. Session scope: other sessions of the same database are untouched.
_COPY_KEEPS_ORDER = "false"


class DuckDbSession:
    """One cursor of the shared connection."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._cur = cursor
        #: a copy's ``preserve_insertion_order`` still to reset (see ``_restore_order``)
        self._order_reset_pending = False

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        try:
            self._cur.execute(sql, params)
            try:
                row = self._cur.fetchone()
            except duckdb.Error:
                return None
        except duckdb.Error as exc:
            raise _to_adapter_error(exc) from exc
        if row is not None and len(row) == 1 and isinstance(row[0], int):
            return row[0]
        return None

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        try:
            return self._cur.execute(sql, params).fetchall()
        except duckdb.Error as exc:
            raise _to_adapter_error(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            try:
                self._cur.execute("ROLLBACK")
            except duckdb.Error:
                pass
            if self._order_reset_pending:
                self._restore_order()
            raise
        self.execute("COMMIT")

    @contextmanager
    def read_arrow(
        self, sql: str, params: Sequence[Any], columns: Sequence[tuple[str, SqlType]]
    ) -> Iterator[Any]:
        # DuckDB's own Arrow export knows every type: ``columns`` is not needed.
        try:
            rel: Any = self._cur.sql(sql, params=list(params) or None)
            to_reader = getattr(rel, "to_arrow_reader", None) or rel.record_batch
            reader = to_reader(ARROW_BATCH_ROWS)
        except duckdb.Error as exc:
            raise _to_adapter_error(exc) from exc
        try:
            yield reader
        finally:
            # A stream abandoned midway (the target failed) keeps the cursor busy ("connection has an open
            # result") until closed: the table's retry reuses this session.
            reader.close()

    @contextmanager
    def read_arrow_ranges(
        self, statements: Sequence[tuple[str, Sequence[Any]]], columns: Sequence[tuple[str, SqlType]]
    ) -> Iterator[list[Any]]:
        # DuckDB parallelises one scan itself: the ranges become one statement, one stream.
        sql = " UNION ALL ".join(f"SELECT * FROM ({part})" for part, _ in statements)
        params = [p for _, part_params in statements for p in part_params]
        with self.read_arrow(sql, params, columns) as reader:
            yield [reader]

    @contextmanager
    def scan_arrow(
        self, name: str, columns: Sequence[tuple[str, str]], readers: Sequence[Any], *, once: bool
    ) -> Iterator[str]:
        # Read once: the statements scan the streams themselves, so every row is written once, into the
        # target. Read twice (a merge): the batches' own Arrow types land in a stage first.
        views = [f"{name}_src{i}" for i in range(len(readers))]
        union = " UNION ALL ".join(f"SELECT * FROM {quote_ident(v)}" for v in views)
        stage = quote_ident(name)
        try:
            self._cur.execute(f"SET SESSION preserve_insertion_order = {_COPY_KEEPS_ORDER}")
            for view, reader in zip(views, readers, strict=True):
                self._cur.register(view, reader)
            if not once:
                self._cur.execute(f"CREATE TEMP TABLE {stage} AS {union}")
        except duckdb.Error as exc:
            self._unregister(views)
            self._restore_order()
            raise _to_adapter_error(exc) from exc
        try:
            yield f"({union})" if once else stage
        finally:
            self._unregister(views)
            if not once:
                try:
                    self._cur.execute(f"DROP TABLE IF EXISTS {stage}")
                except duckdb.Error:
                    pass  # a temporary table dies with its connection anyway
            self._restore_order()

    def _restore_order(self) -> None:
        # Only the copy's statements may write out of order: a model's CTAS with ORDER BY on this session
        # keeps its order. A copy scanned inside a transaction that failed cannot reset before the
        # ROLLBACK: transaction() resets it then.
        try:
            self._cur.execute("RESET SESSION preserve_insertion_order")
            self._order_reset_pending = False
        except duckdb.Error:
            self._order_reset_pending = True

    def _unregister(self, views: Sequence[str]) -> None:
        for view in views:
            try:
                self._cur.unregister(view)
            except duckdb.Error:
                pass

    def interrupt(self) -> None:
        try:
            self._cur.interrupt()
        except duckdb.Error:
            pass

    def close(self) -> None:
        try:
            self._cur.close()
        except duckdb.Error:
            pass


class DuckDbAdapter(DuckDbSession):
    """A DuckDB database file (or in-memory database) as a warehouse."""

    type = "duckdb"
    default_schema = "main"
    dialect: Dialect = DIALECT

    def __init__(self, name: str, path: Path | None, *, read_only: bool = False) -> None:
        self.name = name
        self.path = path
        self.catalog = path.stem if path is not None else "memory"
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            con = duckdb.connect(str(path) if path is not None else ":memory:", read_only=read_only)
        except duckdb.Error as exc:
            raise _open_error(name, path, exc) from exc
        self._con = con
        self._read_only = read_only
        super().__init__(con)

    def maintenance(self) -> Maintenance | None:
        if self.path is None or self._read_only:
            return None
        return checkpoint.WalCheckpoint(self, Path(f"{self.path}.wal"), checkpoint.WAL_CHECKPOINT_BYTES)

    def session(self) -> DuckDbSession:
        return DuckDbSession(self._con.cursor())

    def quote(self, identifier: str) -> str:
        return self.dialect.quote(identifier)

    def qualified(self, schema: str, table: str, catalog: str | None = None) -> str:
        return ".".join(quote_ident(p) for p in (catalog or self.catalog, schema, table))

    def describe(self, schema: str, table: str, catalog: str | None = None) -> list[Column]:
        rows = self.query(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_catalog = ? AND table_schema = ? AND table_name = ? ORDER BY ordinal_position",
            [catalog or self.catalog, schema, table],
        )
        return [Column(str(r[0]), str(r[1]), str(r[2]).upper() != "NO") for r in rows]

    def table_exists(self, schema: str, table: str, catalog: str | None = None) -> bool:
        rows = self.query(
            "SELECT 1 FROM information_schema.tables "
            "WHERE table_catalog = ? AND table_schema = ? AND table_name = ?",
            [catalog or self.catalog, schema, table],
        )
        return bool(rows)

    def list_schemas(self, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT schema_name FROM information_schema.schemata WHERE catalog_name = ? ORDER BY 1",
            [catalog or self.catalog],
        )
        return [str(r[0]) for r in rows]

    def list_tables(self, schema: str, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_catalog = ? AND table_schema = ? AND table_type = 'BASE TABLE' ORDER BY 1",
            [catalog or self.catalog, schema],
        )
        return [str(r[0]) for r in rows]

    def list_relations(self, catalog: str | None = None) -> list[Relation]:
        rows = self.query(
            "SELECT table_catalog, table_schema, table_name, table_type FROM information_schema.tables "
            "WHERE table_catalog = ?",
            [catalog or self.catalog],
        )
        return [
            Relation(str(r[0]), str(r[1]), str(r[2]), "view" if str(r[3]).upper() == "VIEW" else "table")
            for r in rows
        ]

    def catalog_tables(self, catalog: str) -> list[CatalogTable]:
        rows = self.query(
            "SELECT schema_name, table_name, estimated_size FROM duckdb_tables() "
            "WHERE database_name = ? AND NOT temporary ORDER BY 1, 2",
            [catalog],
        )
        user = [r for r in rows if r[0] not in _SYSTEM_SCHEMAS]
        return [CatalogTable(str(r[0]), str(r[1]), row_estimate(r[2])) for r in user]

    def read_columns(self, catalog: str, schemas: Sequence[str]) -> TableColumns:
        if not schemas:
            return {}
        names = sorted(schemas)
        marks = ", ".join("?" for _ in names)
        rows = self.query(
            "SELECT schema_name, table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
            f"WHERE database_name = ? AND schema_name IN ({marks}) "
            "ORDER BY schema_name, table_name, column_index",
            [catalog, *names],
        )
        return columns_by_table(rows)

    def ensure_schema(self, schema: str, catalog: str | None = None) -> bool:
        if schema in self.list_schemas(catalog):
            return False
        cat = quote_ident(catalog or self.catalog)
        self.execute(f"CREATE SCHEMA IF NOT EXISTS {cat}.{quote_ident(schema)}")
        return True

    def close(self) -> None:
        try:
            self._con.close()
        except duckdb.Error:
            pass


def _to_adapter_error(exc: duckdb.Error) -> AdapterError:
    # SQL that does not parse is a compile error, as PostgreSQL's SQLSTATE 42601 says for its own.
    kind = "compile-error" if isinstance(exc, duckdb.ParserException) else classify(exc)
    return AdapterError(first_line(str(exc)), failure_kind=kind)


def _open_error(name: str, path: Path | None, exc: duckdb.Error) -> AdapterError:
    text = str(exc)
    if "lock" in text.lower():
        pid = _LOCK_PID.search(text)
        holder = f" (PID {pid.group(1)})" if pid else ""
        return AdapterError(
            f"DuckDB file {path} of adapter '{name}' is locked by another process{holder}",
            failure_kind="connection-failed",
            hint="wait for that process to finish or stop it, then run again",
        )
    return AdapterError(
        f"cannot open DuckDB file {path} of adapter '{name}': {first_line(text)}",
        failure_kind=classify(exc),
        hint="check the path in [adapter] and that the file is a DuckDB database",
    )

