"""The SQL a warehouse speaks: one ``Dialect`` per warehouse, ANSI defaults here, overrides per adapter.

Runners never test a warehouse's name. They call the operations below on the adapter's ``dialect`` with
the session a worker owns, and they read ``capabilities`` where a strategy depends on what the warehouse
can do. An operation that needs several statements runs them as one unit through ``atomically`` (retried
as a whole after a lost connection, so every unit is idempotent). Each operation is documented with what
it must guarantee; ``docs/adapters.md`` says the same for someone adding a warehouse.

A dialect holds no connection and no mutable state, so one instance serves every thread of a run: usually one
per adapter type; a warehouse whose capabilities depend on the server builds one per adapter at open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rocky_engine.adapters.base import Column, TableName, WarehouseSession, quote_ident
from rocky_engine.adapters.retry import atomically
from rocky_engine.adapters.sql_types import HEX_TEXT, TEXT, SqlType, is_widening, parse_type
from rocky_engine.errors import AdapterError


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a warehouse can do, as runners and dialect defaults consult it (never the warehouse's name)."""

    #: ``MERGE INTO ... WHEN MATCHED ... WHEN NOT MATCHED`` (the merge strategy of transformations)
    merge: bool = True
    #: ``CREATE OR REPLACE TABLE ... AS`` replaces a table in one statement
    replace_table_statement: bool = False
    #: DDL joins a transaction, so a multi-statement rebuild can be rolled back
    transactional_ddl: bool = True
    #: ``INSERT INTO t BY NAME SELECT ...`` matches columns by name
    insert_by_name: bool = False
    #: a connection sees one catalog: relations are named ``schema.table`` and another catalog is refused
    single_catalog: bool = False
    #: SQL reads Parquet files of the engine's own filesystem (load pipelines, connector batches)
    reads_local_files: bool = False

    @property
    def atomic_full_refresh(self) -> bool:
        """A failed full refresh leaves the previous table readable under its name."""
        return self.replace_table_statement or self.transactional_ddl


class Dialect:
    """ANSI defaults; a warehouse subclasses this and overrides what it spells differently."""

    #: the adapter type this dialect belongs to (messages only: never compared outside ``adapters/``)
    name = "ansi"
    capabilities = Capabilities()

    @property
    def level_name(self) -> str:
        """The capability level in one word (messages): the type, where every server of it can do the same
        (a warehouse whose server decides names its level)."""
        return self.name

    # ------------------------------------------------------------------ names

    def quote(self, identifier: str) -> str:
        """One identifier, quoted so that any name (spaces, quotes, reserved words) is taken literally."""
        return quote_ident(identifier)

    def literal(self, text: str) -> str:
        """``text`` as a string literal that this warehouse reads back as exactly ``text``.

        ANSI: single quotes, a quote doubled, every other character as it is. That is right for DuckDB and
        for PostgreSQL with ``standard_conforming_strings = on`` (its default since 9.1), where a backslash
        is an ordinary character. A warehouse whose lexer reads backslash escapes overrides this (Spark).
        Every string rendered into SQL goes through here, so one warehouse has one rule.
        """
        return "'" + text.replace("'", "''") + "'"

    def cast_text(self, expr: str) -> str:
        """``expr`` as text (a regex match on any column type)."""
        return f"CAST({expr} AS VARCHAR)"

    def regex_search(self, expr: str, pattern: str) -> str:
        """Whether the text ``expr`` contains a match of the SQL literal ``pattern`` (a search, not a full
        match: ``~`` on DuckDB and PostgreSQL)."""
        return f"{expr} ~ {pattern}"

    # ------------------------------------------------------------------ types

    def parse_type(self, text: str) -> SqlType:
        """A type as this warehouse reports it, in canonical form."""
        return parse_type(text)

    def render_type(self, t: SqlType) -> str:
        """A canonical type as this warehouse spells it in DDL (every dialect must define it)."""
        raise NotImplementedError(f"dialect {self.name} does not render types")

    def storable(self, t: SqlType) -> SqlType:
        """The closest type this warehouse stores for a type of another warehouse (default: the same)."""
        return t

    def column_type_from(self, source_type: str, source: Dialect) -> SqlType:
        """The type a column gets here when copied from a column of ``source_type`` in ``source``."""
        if type(source) is type(self):
            return self.parse_type(source_type)
        t = source.parse_type(source_type)
        if t.family == "other":
            return TEXT  # a type without a canonical twin travels as its text form
        return self.storable(t)

    def same_type(self, expected: SqlType, actual: SqlType) -> bool:
        """Whether a column of type ``actual`` already is ``expected`` (as this warehouse stores it)."""
        if expected.signature == actual.signature:
            return True
        return self.render_type(expected).lower() == self.render_type(actual).lower()

    def is_safe_widening(self, old: SqlType, new: SqlType) -> bool:
        """Whether ``ALTER COLUMN ... TYPE`` can take a column from ``old`` to ``new`` keeping every value."""
        return is_widening(old, new)

    # ------------------------------------------------------------------ the cross-warehouse copy seam

    def export_type(self, t: SqlType) -> SqlType:
        """The type this warehouse's Arrow reader sends for a value wanted as ``t`` (default: ``t``)."""
        return t

    def ingest_type(self, t: SqlType) -> SqlType:
        """The type this warehouse's Arrow loader needs to receive for a column of type ``t``."""
        return t

    def export_item(self, name: str, source: SqlType, wire: SqlType) -> str:
        """The SELECT item that reads column ``name`` (of type ``source``) as ``wire`` for a copy."""
        col = self.quote(name)
        if wire.family == source.family:
            return col
        if wire == HEX_TEXT:
            raise AdapterError(
                f"column '{name}': dialect {self.name} cannot send binary values as hex text",
                failure_kind="query-rejected",
                hint="exclude the table, or cast the column to text in a view and replicate the view",
            )
        return f"CAST({col} AS {self.render_type(wire)}) AS {col}"

    # ------------------------------------------------------------------ tables and views

    def create_or_replace_as_select(
        self, session: WarehouseSession, table: TableName, select: str, *, exists_as: str | None = None
    ) -> int | None:
        """Make ``table`` a table holding the rows of ``select``, whatever was there (``exists_as``: "table",
        "view" or None, from the run's catalog read). Atomic where ``capabilities.atomic_full_refresh``."""
        q = table.qualified
        if self.capabilities.replace_table_statement and exists_as != "view":
            return session.execute(f"CREATE OR REPLACE TABLE {q} AS {select}")

        def rebuild() -> int | None:
            if exists_as == "view":
                session.execute(f"DROP VIEW {q}")
            if self.capabilities.replace_table_statement:
                return session.execute(f"CREATE OR REPLACE TABLE {q} AS {select}")
            session.execute(f"DROP TABLE IF EXISTS {q}")
            return session.execute(f"CREATE TABLE {q} AS {select}")

        return atomically(session, rebuild, f"full refresh of {q}")

    def create_partitioned_as_select(
        self, session: WarehouseSession, table: TableName, select: str, partition_by: Sequence[str], *,
        exists_as: str | None = None,
    ) -> int | None:
        """The first build of a ``delete_insert`` target: ``create_or_replace_as_select``, laid out by
        ``partition_by`` where the warehouse replaces partitions physically (Spark)."""
        return self.create_or_replace_as_select(session, table, select, exists_as=exists_as)

    def create_or_replace_view(
        self, session: WarehouseSession, table: TableName, select: str, *, exists_as: str | None = None
    ) -> None:
        """Make ``table`` a view of ``select``; a table of that name is replaced (atomically)."""
        q = table.qualified
        if exists_as == "table":
            def swap() -> None:
                session.execute(f"DROP TABLE {q}")
                session.execute(f"CREATE VIEW {q} AS {select}")

            atomically(session, swap, f"replace table {q} by a view")
            return
        session.execute(f"CREATE OR REPLACE VIEW {q} AS {select}")

    def create_table_as(self, session: WarehouseSession, rel: str, select: str) -> int | None:
        """``CREATE TABLE rel AS select``: a new table (an existing one is an error, never replaced)."""
        return session.execute(f"CREATE TABLE {rel} AS {select}")

    def create_table(self, session: WarehouseSession, rel: str, columns: Sequence[tuple[str, str]]) -> None:
        """``CREATE TABLE rel (name type, ...)`` (the caller dropped any previous one)."""
        ddl = ", ".join(f"{self.quote(name)} {type_}" for name, type_ in columns)
        session.execute(f"CREATE TABLE {rel} ({ddl})")

    def drop_table(self, session: WarehouseSession, rel: str) -> None:
        """Drop a table if it exists."""
        session.execute(f"DROP TABLE IF EXISTS {rel}")

    def truncate_table(self, session: WarehouseSession, rel: str) -> None:
        """Remove every row of a table, inside the caller's transaction (``DELETE``: transactional
        everywhere, where ``TRUNCATE`` is not on every warehouse)."""
        session.execute(f"DELETE FROM {rel}")

    def add_column(self, session: WarehouseSession, rel: str, name: str, type_: str) -> None:
        """Add a column (existing rows read NULL); a column of that name already there is not an error."""
        session.execute(f"ALTER TABLE {rel} ADD COLUMN IF NOT EXISTS {self.quote(name)} {type_}")

    def widen_column(self, session: WarehouseSession, rel: str, name: str, type_: str) -> None:
        """Change a column's type in place to a safe widening of it (``is_safe_widening``)."""
        session.execute(f"ALTER TABLE {rel} ALTER COLUMN {self.quote(name)} TYPE {type_}")

    # ------------------------------------------------------------------ writing rows

    def insert_select(self, session: WarehouseSession, table: TableName, select: str) -> int | None:
        """Append the rows of ``select`` to ``table``, matching columns by name (a target column the select
        lacks is an error in ANSI, NULL with ``insert_by_name``)."""
        if self.capabilities.insert_by_name:
            return session.execute(f"INSERT INTO {table.qualified} BY NAME {select}")
        cols = ", ".join(self.quote(c) for c in self.table_columns(session, table))
        return session.execute(f"INSERT INTO {table.qualified} ({cols}) SELECT {cols} FROM ({select}) AS s")

    def merge(
        self, session: WarehouseSession, table: TableName, select: str, unique_key: Sequence[str],
        update_columns: Sequence[str] = (),
    ) -> int | None:
        """Upsert the rows of ``select`` into ``table`` on ``unique_key``: matched rows get
        ``update_columns`` (default: every non-key column), the others are inserted; one statement."""
        if not self.capabilities.merge:
            raise AdapterError(
                f"warehouse dialect {self.name} has no MERGE statement",
                failure_kind="query-rejected",
                hint="use strategy delete_insert, or full_refresh",
            )
        columns = self.table_columns(session, table)
        keys = list(unique_key)
        update = list(update_columns) or [c for c in columns if c not in keys]
        q = self.quote
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in keys)
        sets = ", ".join(f"{q(c)} = s.{q(c)}" for c in update)
        cols = ", ".join(q(c) for c in columns)
        vals = ", ".join(f"s.{q(c)}" for c in columns)
        matched = f" WHEN MATCHED THEN UPDATE SET {sets}" if sets else ""
        return session.execute(
            f"MERGE INTO {table.qualified} AS t USING ({select}) AS s ON {on}{matched} "
            f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({vals})"
        )

    def delete_insert(
        self, session: WarehouseSession, table: TableName, select: str, partition_by: Sequence[str]
    ) -> int | None:
        """Replace the partitions of ``table`` that ``select`` has rows for with those rows, in one unit; a
        NULL partition value is replaced too (``IS NOT DISTINCT FROM``), never duplicated."""
        q = self.quote
        same_partition = " AND ".join(f"t.{q(p)} IS NOT DISTINCT FROM s.{q(p)}" for p in partition_by)
        stage_name = f"__rocky_di_{table.table}"
        stage = q(stage_name)

        def swap() -> int | None:
            self.stage_as_select(session, stage_name, select)
            session.execute(
                f"DELETE FROM {table.qualified} AS t "
                f"WHERE EXISTS (SELECT 1 FROM {stage} AS s WHERE {same_partition})"
            )
            rows = self.insert_select(session, table, f"SELECT * FROM {stage}")
            self.drop_stage(session, stage_name)
            return rows

        return atomically(session, swap, f"delete+insert into {table.qualified}")

    def stage_as_select(self, session: WarehouseSession, name: str, select: str) -> None:
        """A temporary table of this session holding the rows of ``select``, for the rest of the unit."""
        session.execute(f"CREATE TEMP TABLE {self.quote(name)} AS {select}")

    def drop_stage(self, session: WarehouseSession, name: str) -> None:
        """Drop a ``stage_as_select`` table at the end of its unit."""
        session.execute(f"DROP TABLE {self.quote(name)}")

    # ------------------------------------------------------------------ local files

    def scan_files(
        self, fmt: str, paths: Sequence[str], *, union_by_name: bool = False,
        csv_delimiter: str | None = None, csv_header: bool | None = None,
    ) -> str:
        """A FROM item reading local files of format ``fmt`` ("parquet", "csv", "jsonl"); only where
        ``capabilities.reads_local_files``. ``union_by_name``: files whose columns differ in order.
        ``csv_delimiter`` / ``csv_header``: CSV settings to force (None: detected from the file)."""
        raise AdapterError(
            f"warehouse dialect {self.name} cannot read local files",
            failure_kind="query-rejected",
            hint="load into a warehouse that reads local files (duckdb), then replicate onward",
        )

    def describe_select(self, session: WarehouseSession, select: str) -> list[Column]:
        """The columns a SELECT yields, without running it (used with ``scan_files``)."""
        raise AdapterError(
            f"warehouse dialect {self.name} cannot describe a query",
            failure_kind="query-rejected",
        )

    # ------------------------------------------------------------------ reading back

    def table_columns(self, session: WarehouseSession, table: TableName) -> list[str]:
        """Column names of ``table`` in order, from ``information_schema`` on the worker's own session."""
        rows = session.query(
            "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? AND table_schema = ? "
            "AND table_name = ? ORDER BY ordinal_position",
            [table.catalog, table.schema, table.table],
        )
        return [str(r[0]) for r in rows]

    def read_watermark(self, session: WarehouseSession, rel: str, column: str) -> str | None:
        """``MAX(column)`` of a relation as watermark text (ISO 8601 for a timestamp); None when empty."""
        rows = session.query(f"SELECT MAX({self.quote(column)}) FROM {rel}")
        return watermark_text(rows[0][0] if rows else None)

    def read_watermarks(
        self, session: WarehouseSession, items: Sequence[tuple[str, str]]
    ) -> list[str | None] | None:
        """``read_watermark`` of each ``(rel, column)`` in one statement, in order; None when the warehouse
        answered with another number of rows. Every column must share one type (``UNION ALL``).

        Raises:
            AdapterError: the statement failed (one unreadable relation fails the whole batch).
        """
        sql = " UNION ALL ".join(
            f"SELECT {i} AS n, MAX({self.quote(column)}) AS m FROM {rel}"
            for i, (rel, column) in enumerate(items)
        )
        rows = session.query(sql)
        if len(rows) != len(items):
            return None
        values: list[str | None] = [None] * len(items)
        for n, value in rows:
            values[int(n)] = watermark_text(value)
        return values


#: the ANSI dialect, for SQL that runs where only ANSI is known (DuckDB and PostgreSQL speak it)
ANSI = Dialect()


def copy_item(name: str, source_type: str, source: Dialect, target: Dialect) -> tuple[str, SqlType]:
    """How one column crosses the copy seam from ``source`` to ``target``: the source SELECT item and the
    canonical type its values travel as.

    Three answers meet: the type the target column gets (``column_type_from``), what the target's loader
    needs for it (``ingest_type``) and what the source's reader can send (``export_type``); the source
    casts where that differs from the column it has (``export_item``).
    """
    wire = source.export_type(target.ingest_type(target.column_type_from(source_type, source)))
    return source.export_item(name, source.parse_type(source_type), wire), wire


def watermark_text(value: Any) -> str | None:
    """A warehouse value as the text a watermark is stored as (``isoformat()`` when it has one)."""
    if value is None:
        return None
    fmt = getattr(value, "isoformat", None)
    return str(fmt()) if callable(fmt) else str(value)
