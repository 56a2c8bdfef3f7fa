"""The warehouse adapter protocol every runner talks to.

An adapter owns a connection to one warehouse. ``session()`` returns an independent session for one
worker thread (a cursor of the same DuckDB connection, or a new PostgreSQL connection), so independent
models or tables run concurrently without sharing a cursor. Every failure surfaces as
``rocky_engine.errors.AdapterError`` with a ``failure_kind`` from CONTRACT section 3.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol


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
    """A warehouse: sessions plus catalog introspection."""

    name: str
    type: str
    catalog: str

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
    """ANSI double-quote quoting, shared by DuckDB and PostgreSQL."""
    return '"' + identifier.replace('"', '""') + '"'


def iter_chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
