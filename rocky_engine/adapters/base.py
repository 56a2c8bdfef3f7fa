"""The warehouse protocol every runner talks to: sessions, adapters, and the names they pass around.

An adapter owns a connection to one warehouse. ``session()`` returns an independent session for one
worker thread (a cursor of the same DuckDB connection, or a new PostgreSQL connection), so independent
models or tables run concurrently without sharing a cursor. Every failure surfaces as
``rocky_engine.errors.AdapterError`` with a ``failure_kind`` from CONTRACT section 3.

What differs between warehouses in SQL (DDL, merge, types, watermarks) is not here but in the adapter's
``dialect`` (``adapters.dialect``); this module is about connections, catalogs and moving rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.adapters.sql_types import SqlType

#: rows per Arrow record batch on the copy seam: bounds a copy's memory to a few batches
ARROW_BATCH_ROWS = 50_000


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a relation as the warehouse reports it."""

    name: str
    data_type: str
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class Relation:
    """A table or view known to the warehouse catalog."""

    catalog: str
    schema: str
    name: str
    kind: str = "table"  # "table" | "view"


@dataclass(frozen=True, slots=True)
class TableName:
    """A relation a statement writes: its parts and its quoted, qualified name (``adapter.qualified``)."""

    catalog: str
    schema: str
    table: str
    qualified: str

    @property
    def full_name(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.table}"

    @property
    def asset_key(self) -> list[str]:
        return [self.catalog, self.schema, self.table]


@dataclass(frozen=True, slots=True)
class CatalogTable:
    """A base table found by the one catalog read of a run, with the warehouse's row estimate."""

    schema: str
    name: str
    row_count: int | None = None


#: columns of many relations from one catalog read, keyed ``(schema, table)``
TableColumns = dict[tuple[str, str], list[Column]]


class WarehouseSession(Protocol):
    """A unit of work on one connection or cursor; not shared between threads."""

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        """Run one statement; return the affected/created row count when the warehouse reports one."""
        ...

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement and fetch every row."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Group statements atomically (commit on success, roll back on error)."""
        ...

    def read_arrow(
        self, sql: str, params: Sequence[Any], columns: Sequence[tuple[str, SqlType]]
    ) -> AbstractContextManager[Any]:
        """Stream the rows of one SELECT as a ``pyarrow.RecordBatchReader`` (the copy seam's source side).

        ``columns`` are the names and canonical types of the SELECT's items, for a driver that builds the
        Arrow arrays itself; a driver with its own Arrow export may ignore them.
        """
        ...

    def read_arrow_ranges(
        self, statements: Sequence[tuple[str, Sequence[Any]]], columns: Sequence[tuple[str, SqlType]]
    ) -> AbstractContextManager[list[Any]]:
        """One ``RecordBatchReader`` per ``(sql, params)``, each read concurrently when the warehouse can
        (the parallel range reads of one large table: PostgreSQL runs each on its own connection)."""
        ...

    def scan_arrow(
        self, name: str, columns: Sequence[tuple[str, str]], readers: Sequence[Any], *, once: bool
    ) -> AbstractContextManager[str]:
        """Make the batches of ``readers`` readable in SQL as one relation for the ``with`` block, and
        return that relation's SQL text (the copy seam's target side).

        ``once``: the statements read the relation only once, so a warehouse that scans Arrow streams
        (DuckDB) reads the readers directly, with no stage; otherwise the batches land in the temporary
        table ``name`` first. ``columns`` are ``(name, DDL type)`` of the batches' columns, for a driver
        that must declare the stage before loading it.
        """
        ...

    def interrupt(self) -> None:
        """Cancel the statement in flight on this session, if any (called from another thread)."""
        ...

    def close(self) -> None: ...


class Maintenance(Protocol):
    """Work a warehouse needs done while no statement runs (a DuckDB checkpoint, say).

    Runners ask ``due()`` between tasks (it must be cheap); when it says yes they stop starting tasks,
    let the running ones finish, call ``run()``, and go on. After ``run()``, even one that could not do
    its work, ``due()`` stays False until more has been written, so a run always makes progress.
    """

    def due(self) -> bool: ...

    def run(self) -> None: ...


class WarehouseAdapter(WarehouseSession, Protocol):
    """A warehouse: sessions, catalog introspection, and the dialect its SQL is written in."""

    name: str
    type: str
    catalog: str
    #: the schema a model without ``[target] schema`` lands in
    default_schema: str
    dialect: Dialect

    def session(self) -> WarehouseSession:
        """An independent session for one worker thread."""
        ...

    def describe(self, schema: str, table: str, catalog: str | None = None) -> list[Column]:
        """Columns of a relation, in order; empty when it does not exist."""
        ...

    def table_exists(self, schema: str, table: str, catalog: str | None = None) -> bool: ...

    def list_schemas(self, catalog: str | None = None) -> list[str]: ...

    def list_tables(self, schema: str, catalog: str | None = None) -> list[str]: ...

    def list_relations(self, catalog: str | None = None) -> list[Relation]:
        """Every table and view of a catalog in one catalog query (runs call this once, not per model)."""
        ...

    def catalog_tables(self, catalog: str) -> list[CatalogTable]:
        """Every user base table of ``catalog`` with its estimated row count, in one catalog query."""
        ...

    def read_columns(self, catalog: str, schemas: Sequence[str]) -> TableColumns:
        """Columns (ordered) of every table and view in ``schemas``, in one catalog query."""
        ...

    def maintenance(self) -> Maintenance | None:
        """What a long concurrent run must pause for now and then; None when nothing."""
        ...

    def ensure_schema(self, schema: str, catalog: str | None = None) -> bool:
        """Create the schema when missing; return True when it was created."""
        ...

    def quote(self, identifier: str) -> str:
        """Quote one identifier for this dialect."""
        ...

    def qualified(self, schema: str, table: str, catalog: str | None = None) -> str:
        """The fully qualified, quoted name of a relation."""
        ...


def quote_ident(identifier: str) -> str:
    """ANSI double-quote quoting (DuckDB and PostgreSQL; a dialect with other quotes overrides ``quote``)."""
    return '"' + identifier.replace('"', '""') + '"'


def row_estimate(value: object) -> int | None:
    """A catalog's row estimate as a count; negative or missing (never analysed) is unknown."""
    return value if isinstance(value, int) and value >= 0 else None


def columns_by_table(rows: Sequence[tuple[Any, ...]]) -> TableColumns:
    """``(schema, table, column, type, nullable)`` rows, ordered, as ``TableColumns``."""
    out: TableColumns = {}
    for schema, table, column, data_type, nullable in rows:
        column_info = Column(str(column), str(data_type), bool(nullable))
        out.setdefault((str(schema), str(table)), []).append(column_info)
    return out
