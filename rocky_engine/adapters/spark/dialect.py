"""Spark SQL: backtick quoting, Spark type names, and every strategy on both capability levels.

A Spark endpoint has one of two capability levels, read at open (``capabilities.probe``):

- **transactional** (Delta Lake, Iceberg, Hudi: Databricks): ``CREATE OR REPLACE TABLE ... AS`` swaps a
  table in one commit and ``MERGE INTO`` upserts in one statement, as on DuckDB.
- **file** (Spark's built-in Parquet tables): no MERGE, UPDATE, DELETE, CREATE OR REPLACE TABLE or column
  type change (all ``UNSUPPORTED_FEATURE.TABLE_OPERATION``). Measured on Spark 4.3.0: ``INSERT OVERWRITE``
  deletes the table's files *before* it writes, so a cancelled or failed one leaves the table empty. So a
  rewrite here builds a stage table next to the target and swaps it in by two renames (``_swap``): a
  reader sees the old table, then for a moment no table, then the new one, never a half-written one.
  That makes ``full_refresh`` of an existing table, ``merge`` (a full rewrite that keeps the unchanged
  rows) and a column change under ``incremental`` full rewrites of the table. ``delete_insert`` is a
  dynamic partition overwrite of a table partitioned by ``partition_by``: the old partitions stay
  readable until the job commits.

Drift under incremental, merge and delete_insert (the SELECT's columns against the table's): a new
column is ``ALTER TABLE ... ADD COLUMNS``; a dropped column or a changed type rebuilds the table with the
SELECT's columns, keeping its rows (cast to the new types; a value that does not cast fails the model).
Spark has no multi-statement transactions (``transactional_ddl`` is False): every unit of statements here
is written so that running it again after a failure completes it (stale stages are dropped first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rocky_engine.adapters.base import Column, TableName, WarehouseSession
from rocky_engine.adapters.dialect import Capabilities, Dialect
from rocky_engine.adapters.spark.orphans import execute_creating
from rocky_engine.adapters.sql_types import TEXT, SqlType, parse_type, render_by_names
from rocky_engine.errors import AdapterError

#: prefix of the tables a rewrite stages next to its target (never listed as relations of the catalog)
STAGE_PREFIX = "__rocky_"
_INT_NAMES = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}
_SIMPLE_NAMES = {
    "string": "STRING", "bool": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP_NTZ",
    "timestamptz": "TIMESTAMP", "blob": "BINARY", "hex": "STRING",
    # No Spark twin (Spark 4.3's TIME is not on every server): their text form.
    "time": "STRING", "uuid": "STRING", "json": "STRING", "interval": "STRING",
}
#: Spark spellings the shared parser reads otherwise: TIMESTAMP is an instant (session time zone)
_SPARK_TYPES = {
    "timestamp": SqlType("timestamptz"), "timestamp_ltz": SqlType("timestamptz"),
    "timestamp_ntz": SqlType("timestamp"), "byte": SqlType("int", 8),
}
_AS_TEXT = frozenset({"time", "uuid", "json", "interval"})
#: the session conf that makes INSERT OVERWRITE ... PARTITION replace only the partitions written
_DYNAMIC_OVERWRITE = "SET spark.sql.sources.partitionOverwriteMode=dynamic"
_PARTITION_HEADER = "# Partition Information"


def capabilities_for(table_format: str, merge: bool) -> Capabilities:
    """The dialect capabilities of a Spark endpoint whose new tables are ``table_format``."""
    return Capabilities(
        merge=merge,
        replace_table_statement=merge,
        transactional_ddl=False,
        insert_by_name=True,
        single_catalog=False,
        reads_local_files=False,
    )


@dataclass(frozen=True, slots=True)
class TableShape:
    """A table's columns in order, and its partition columns (``DESCRIBE TABLE``)."""

    columns: list[Column]
    partitions: list[str]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


class SparkDialect(Dialect):
    name = "spark"

    def __init__(self, table_format: str = "parquet", merge: bool = False) -> None:
        self.table_format = table_format
        self.capabilities = capabilities_for(table_format, merge)

    @property
    def level_name(self) -> str:
        return self.table_format

    @property
    def level(self) -> str:
        """The capability level in words (``rocky doctor``, messages)."""
        if self.capabilities.merge:
            return f"{self.table_format} tables: MERGE INTO and atomic CREATE OR REPLACE TABLE"
        return (
            f"{self.table_format} tables: no MERGE/UPDATE/DELETE; full refresh and merge rewrite the table "
            "through a stage and a rename"
        )

    # ------------------------------------------------------------------ names and types

    def quote(self, identifier: str) -> str:
        return "`" + identifier.replace("`", "``") + "`"

    def literal(self, text: str) -> str:
        # Spark's lexer reads backslash escapes in a literal (spark.sql.parser.escapedStringLiterals=false,
        # the default): measured on 4.3.0, 'a\b' is a + backspace, 'a\qb' is aqb, '^\d$' is ^d$. So a
        # backslash is doubled first, then a quote is escaped with one: \' is in every Spark grammar, while
        # '' (read as a quote by 4.3) is not known to be by older servers. Newlines and non-ASCII text pass
        # as they are. A server started with escapedStringLiterals=true reads no escapes (docs/adapters.md).
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def cast_text(self, expr: str) -> str:
        return f"CAST({expr} AS STRING)"  # Spark's VARCHAR needs a length

    def regex_search(self, expr: str, pattern: str) -> str:
        return f"{expr} RLIKE {pattern}"  # a search, like ~

    def parse_type(self, text: str) -> SqlType:
        low = text.strip().lower()
        if low in _SPARK_TYPES:
            return _SPARK_TYPES[low]
        return parse_type(text)

    def render_type(self, t: SqlType) -> str:
        return render_by_names(t, _INT_NAMES, "DECIMAL(38,0)", _SIMPLE_NAMES)

    def storable(self, t: SqlType) -> SqlType:
        if t.family == "int" and (t.size or 0) > 64:
            return SqlType("decimal", 38, 0)
        if t.family == "decimal" and (t.size is None or t.size > 38):
            return SqlType("float", 64)
        if t.family == "string" or t.family in _AS_TEXT:
            return TEXT  # STRING: Spark's VARCHAR(n) is a checked STRING, nothing is gained by it
        return t

    def is_safe_widening(self, old: SqlType, new: SqlType) -> bool:
        # File tables cannot change a column's type (NOT_SUPPORTED_CHANGE_COLUMN): drift rebuilds instead.
        return False

    # ------------------------------------------------------------------ tables and views

    def create_or_replace_as_select(
        self, session: WarehouseSession, table: TableName, select: str, *, exists_as: str | None = None
    ) -> int | None:
        q = table.qualified
        if exists_as == "view":
            session.execute(f"DROP VIEW IF EXISTS {q}")
            exists_as = None
        if self.capabilities.replace_table_statement:
            session.execute(f"CREATE OR REPLACE TABLE {q} AS {select}")
            return None
        if exists_as is None:
            self._create(session, table, table.table, f"CREATE TABLE {q} AS {select}")
            return None
        self._swap(session, table, select)
        return None

    def create_partitioned_as_select(
        self, session: WarehouseSession, table: TableName, select: str, partition_by: Sequence[str], *,
        exists_as: str | None = None,
    ) -> int | None:
        q = table.qualified
        if exists_as == "view":
            session.execute(f"DROP VIEW IF EXISTS {q}")
        # Spark puts the partition columns last, whatever their place in the SELECT.
        self._create(session, table, table.table,
                     f"CREATE TABLE {q} PARTITIONED BY ({self._list(partition_by)}) AS {select}")
        return None

    def create_or_replace_view(
        self, session: WarehouseSession, table: TableName, select: str, *, exists_as: str | None = None
    ) -> None:
        q = table.qualified
        if exists_as == "table":
            session.execute(f"DROP TABLE IF EXISTS {q}")
        session.execute(f"CREATE OR REPLACE VIEW {q} AS {select}")

    def truncate_table(self, session: WarehouseSession, rel: str) -> None:
        session.execute(f"TRUNCATE TABLE {rel}")  # DELETE is a MERGE-level operation on file tables

    def add_column(self, session: WarehouseSession, rel: str, name: str, type_: str) -> None:
        try:
            session.execute(f"ALTER TABLE {rel} ADD COLUMNS ({self.quote(name)} {type_})")
        except AdapterError as exc:
            if "COLUMN_ALREADY_EXISTS" not in exc.message:
                raise

    def widen_column(self, session: WarehouseSession, rel: str, name: str, type_: str) -> None:
        raise AdapterError(
            f"Spark cannot change the type of column {name} of {rel} in place",
            failure_kind="query-rejected",
            hint="the table must be rebuilt (a full refresh)",
        )

    # ------------------------------------------------------------------ writing rows

    def insert_select(self, session: WarehouseSession, table: TableName, select: str) -> int | None:
        shape = self.table_shape(session, table)
        new = self.describe_select(session, select)
        if not self._take_columns(session, table, shape, new):
            # A dropped or retyped column: rebuild with the old rows (cast) plus the new ones.
            self._swap(session, table, f"{self._old_rows(table, shape, new)} UNION ALL "
                                       f"SELECT {self._names(new)} FROM ({select}) AS s")
            return None
        session.execute(f"INSERT INTO {table.qualified} BY NAME {select}")
        return None

    def merge(
        self, session: WarehouseSession, table: TableName, select: str, unique_key: Sequence[str],
        update_columns: Sequence[str] = (),
    ) -> int | None:
        if self.capabilities.merge:
            shape = self.table_shape(session, table)
            if self._take_columns(session, table, shape, self.describe_select(session, select)):
                return super().merge(session, table, select, unique_key, update_columns)
        self._swap(session, table, self.merge_rewrite_select(session, table, select, unique_key,
                                                            update_columns))
        return None

    def merge_rewrite_select(
        self, session: WarehouseSession, table: TableName, select: str, unique_key: Sequence[str],
        update_columns: Sequence[str] = (),
    ) -> str:
        """The SELECT of a merged table without MERGE: the rows of ``select`` (a matched row keeps its old
        value in a column outside ``update_columns``) plus every old row whose key ``select`` lacks.

        The result has the SELECT's columns; an old row gets NULL in a column the table did not have.
        """
        q = self.quote
        new = self.describe_select(session, select)
        shape = self.table_shape(session, table)
        old = set(shape.names)
        keys = list(unique_key)
        update = set(update_columns) or {c.name for c in new if c.name not in keys}
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in keys)
        flag = q(f"{STAGE_PREFIX}matched")

        def new_value(c: Column) -> str:
            if c.name in update or c.name in keys or c.name not in old:
                return f"s.{q(c.name)} AS {q(c.name)}"
            return f"CASE WHEN t.{flag} THEN t.{q(c.name)} ELSE s.{q(c.name)} END AS {q(c.name)}"

        fresh = ", ".join(new_value(c) for c in new)
        kept = self._old_rows(table, shape, new, f"LEFT ANTI JOIN ({select}) AS s ON {on}")
        return (
            f"SELECT {fresh} FROM ({select}) AS s LEFT JOIN (SELECT *, true AS {flag} FROM "
            f"{table.qualified}) AS t ON {on} UNION ALL {kept}"
        )

    def delete_insert(
        self, session: WarehouseSession, table: TableName, select: str, partition_by: Sequence[str]
    ) -> int | None:
        """A dynamic partition overwrite; a table not (yet) partitioned by ``partition_by`` (the first
        build) or whose columns changed is rewritten once as one, keeping the other partitions' rows."""
        parts = list(partition_by)
        shape = self.table_shape(session, table)
        new = self.describe_select(session, select)
        q = self.quote
        if shape.partitions != parts or not self._take_columns(session, table, shape, new):
            same = " AND ".join(f"t.{q(p)} <=> s.{q(p)}" for p in parts)
            kept = self._old_rows(table, shape, new,
                                  f"WHERE NOT EXISTS (SELECT 1 FROM ({select}) AS s WHERE {same})")
            self._swap(session, table, f"SELECT {self._names(new)} FROM ({select}) AS n UNION ALL {kept}",
                       partition_by=parts)
            return None
        if len(new) != len(shape.columns):  # columns were added: read the order Spark gave them
            shape = self.table_shape(session, table)
        session.execute(_DYNAMIC_OVERWRITE)
        session.execute(
            f"INSERT OVERWRITE TABLE {table.qualified} PARTITION ({self._list(parts)}) "
            f"SELECT {self._names(shape.columns)} FROM ({select}) AS s"
        )
        return None

    # ------------------------------------------------------------------ drift and rewrites

    def _take_columns(
        self, session: WarehouseSession, table: TableName, shape: TableShape, new: Sequence[Column]
    ) -> bool:
        """Add the columns of ``new`` that ``table`` lacks (``ADD COLUMNS``); False, changing nothing,
        when a column of the table is missing from ``new`` or has another type there (a rebuild)."""
        if _changed(shape.columns, new, self):
            return False
        have = {c.name.lower() for c in shape.columns}
        for column in new:
            if column.name.lower() not in have:
                self.add_column(session, table.qualified, column.name, column.data_type)
        return True

    def _old_rows(
        self, table: TableName, shape: TableShape, new: Sequence[Column], where: str = ""
    ) -> str:
        """The table's rows (alias ``t``, filtered by ``where``) in the columns of ``new``: cast to their
        new types, NULL where new."""
        q = self.quote
        have = {c.name for c in shape.columns}
        items = ", ".join(
            f"CAST(t.{q(c.name)} AS {c.data_type}) AS {q(c.name)}" if c.name in have
            else f"CAST(NULL AS {c.data_type}) AS {q(c.name)}"
            for c in new
        )
        return f"SELECT {items} FROM {table.qualified} AS t {where}".rstrip()

    def _names(self, columns: Sequence[Column]) -> str:
        return ", ".join(self.quote(c.name) for c in columns)

    def _swap(
        self, session: WarehouseSession, table: TableName, select: str, *, partition_by: Sequence[str] = ()
    ) -> None:
        """Replace ``table`` by a table of ``select`` (which may read ``table``), never showing a
        half-written one under its name: a stage is built beside it first.

        Unpartitioned: two renames swap the stage in. Partitioned: the catalog keeps each partition's
        location, which a rename would leave naming the stage's directory, so the table is dropped and
        created again from the stage (a reader meanwhile finds no table, never a partial one). A stage
        left by a killed run is dropped first, and the directory a cancelled write leaves is reclaimed
        (``_create``), so running the unit again completes it.
        """
        q = table.qualified
        if self.capabilities.replace_table_statement:
            parts = f" PARTITIONED BY ({self._list(partition_by)})" if partition_by else ""
            session.execute(f"CREATE OR REPLACE TABLE {q}{parts} AS {select}")
            return
        stage_name = f"{STAGE_PREFIX}stage_{table.table}"
        stage = self._sibling(table, stage_name)
        old = self._sibling(table, old_name(table))
        session.execute(f"DROP TABLE IF EXISTS {stage}")
        session.execute(f"DROP TABLE IF EXISTS {old}")
        self._create(session, table, stage_name, f"CREATE TABLE {stage} AS {select}")
        if partition_by:
            session.execute(f"DROP TABLE {q}")
            self._create(session, table, table.table, f"CREATE TABLE {q} PARTITIONED BY "
                         f"({self._list(partition_by)}) AS SELECT * FROM {stage}")
            session.execute(f"DROP TABLE {stage}")
            return
        # RENAME TO takes a two-part name: the table stays in its catalog.
        schema = self.quote(table.schema)
        self._create(session, table, old_name(table),
                     f"ALTER TABLE {q} RENAME TO {schema}.{self.quote(old_name(table))}")
        self._create(session, table, table.table,
                     f"ALTER TABLE {stage} RENAME TO {schema}.{self.quote(table.table)}")
        session.execute(f"DROP TABLE IF EXISTS {old}")

    def _create(self, session: WarehouseSession, near: TableName, name: str, statement: str) -> None:
        """Run ``statement``, which makes the managed table ``name`` (in ``near``'s schema) appear;
        an orphaned directory at its location (a cancelled write's) is reclaimed first (``orphans``)."""
        execute_creating(session, statement, catalog=near.catalog, schema=near.schema, name=name,
                         scratch=f"{STAGE_PREFIX}gc_{name}", dialect=self)

    def _list(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    def _sibling(self, table: TableName, name: str) -> str:
        return ".".join(self.quote(p) for p in (table.catalog, table.schema, name))

    # ------------------------------------------------------------------ reading back

    def table_shape(self, session: WarehouseSession, table: TableName) -> TableShape:
        """Columns and partition columns of an existing table (one ``DESCRIBE TABLE``)."""
        rows = session.query(f"DESCRIBE TABLE {table.qualified}")
        columns: list[Column] = []
        partitions: list[str] = []
        section = "columns"
        for name, data_type, *_ in rows:
            text = str(name or "").strip()
            if text.startswith("#"):
                if text != "# col_name":  # the header row of the partition columns
                    section = "partitions" if text == _PARTITION_HEADER else "other"
                continue
            if not text:
                continue
            if section == "columns":
                columns.append(Column(text, str(data_type)))
            elif section == "partitions":
                partitions.append(text)
        return TableShape(columns, partitions)

    def table_columns(self, session: WarehouseSession, table: TableName) -> list[str]:
        return self.table_shape(session, table).names

    def describe_select(self, session: WarehouseSession, select: str) -> list[Column]:
        # Analysed, not run: Spark plans the query and reports its output columns.
        rows = session.query(f"DESCRIBE QUERY {select}")
        return [Column(str(r[0]), str(r[1])) for r in rows if r[0] and not str(r[0]).startswith("#")]


def old_name(table: TableName) -> str:
    """The name a swapped-out table has for the moment between the two renames."""
    return f"{STAGE_PREFIX}old_{table.table}"


def _changed(old: Sequence[Column], new: Sequence[Column], dialect: SparkDialect) -> bool:
    """Whether a column of ``old`` is missing from ``new`` or has another type there."""
    types = {c.name.lower(): c.data_type for c in new}
    for column in old:
        have = types.get(column.name.lower())
        if have is None:
            return True
        if dialect.parse_type(have) != dialect.parse_type(column.data_type):
            return True
    return False


DIALECT = SparkDialect()
