"""Spark over Spark Connect as a warehouse: the connection layer's sessions behind the adapter protocol.

``SparkAdapter.connect`` opens the endpoint (``connection.SparkConnection``), probes its capability level
(``capabilities.probe``: the format new tables get, MERGE or not) and builds the dialect for that level
(``dialect.SparkDialect``). Every worker gets a server-side session of its own (``session()``), so models
run concurrently without sharing temp views, confs or interrupt tags.

Spark has no information_schema on its built-in catalog: the catalog is read with ``SHOW DATABASES``,
``SHOW TABLES`` / ``SHOW VIEWS`` per database and ``DESCRIBE TABLE``. Tables a rewrite stages beside its
target (``__rocky_*``) are never listed. There are no transactions: ``transaction()`` only groups
statements, and every unit the dialect runs is safe to run again (``dialect`` module doc).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocky_engine.adapters.base import CatalogTable, Column, Maintenance, Relation, TableColumns
from rocky_engine.adapters.spark.connection import SparkConnection
from rocky_engine.adapters.spark.dialect import STAGE_PREFIX, SparkDialect
from rocky_engine.adapters.spark.errors import SparkAdapterError
from rocky_engine.errors import AdapterError

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.adapters.spark.capabilities import SparkCapabilities
    from rocky_engine.adapters.spark.options import SparkConnectOptions
    from rocky_engine.adapters.spark.session import SparkConnectSession
    from rocky_engine.adapters.sql_types import SqlType

#: error classes that mean "no such relation / schema": an empty answer for catalog reads
_MISSING = ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND", "NO_SUCH_", "NOT_FOUND")


class SparkSession:
    """One worker's Spark Connect session behind the ``WarehouseSession`` protocol."""

    def __init__(self, inner: SparkConnectSession, staging_dir: Path | None = None) -> None:
        self.inner = inner
        #: where replication stages Parquet the server reads (None: Arrow upload; ``spark.ingest``)
        self.staging_dir = staging_dir

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        self.inner.execute(sql, params)
        return None  # Spark reports no row counts for commands

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.inner.query(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        # No multi-statement transactions on Spark: the units run here are idempotent instead.
        yield

    def read_arrow(
        self, sql: str, params: Sequence[Any], columns: Sequence[tuple[str, SqlType]]
    ) -> Any:
        from rocky_engine.adapters.spark import source  # sparkrepl: Spark's own Arrow stream, streamed

        return source.read_arrow(self.inner, sql, params)

    def read_arrow_ranges(
        self, statements: Sequence[tuple[str, Sequence[Any]]], columns: Sequence[tuple[str, SqlType]]
    ) -> Any:
        from rocky_engine.adapters.spark import source  # sparkrepl

        return source.read_arrow_ranges(self.inner, statements)

    def scan_arrow(
        self, name: str, columns: Sequence[tuple[str, str]], readers: Sequence[Any], *, once: bool
    ) -> Any:
        from rocky_engine.adapters.spark import ingest  # sparkrepl: Arrow upload, or staged Parquet

        return ingest.scan_arrow(self.inner, name, readers, staging_dir=self.staging_dir)

    def interrupt(self) -> None:
        self.inner.interrupt()

    def reset(self) -> None:
        """A new server-side session for the next statement (``RetryingSession`` after a lost one)."""
        self.inner.reset()

    def close(self) -> None:
        self.inner.close()


class SparkAdapter(SparkSession):
    """A Spark Connect endpoint as a warehouse (its main session serves the adapter's own statements)."""

    type = "spark"
    default_schema = "default"

    def __init__(
        self, name: str, connection: SparkConnection, catalog: str, caps: SparkCapabilities,
        staging_dir: Path | None = None,
    ) -> None:
        super().__init__(connection.main, staging_dir)
        self.name = name
        self.connection = connection
        self.catalog = catalog
        self.capability_level = caps
        self.spark_dialect = SparkDialect(caps.table_format, caps.merge)
        self.dialect: Dialect = self.spark_dialect

    @classmethod
    def connect(
        cls, name: str, options: SparkConnectOptions, catalog: str, *, expected_format: str | None = None,
        staging_dir: Path | None = None,
    ) -> SparkAdapter:
        """Open, probe the capability level, and check it against a declared ``table_format``.

        Raises:
            AdapterError: unreachable (connection-failed), token refused (auth-failed), or the server's
                table format is not the one the config declares (query-rejected).
        """
        connection = SparkConnection.open(options)
        try:
            caps = connection.capabilities()
            if expected_format is not None and caps.table_format != expected_format.lower():
                raise AdapterError(
                    f"adapter '{name}' declares table_format = \"{expected_format}\", but the Spark "
                    f"server at {connection.where} creates {caps.table_format} tables",
                    failure_kind="query-rejected",
                    hint="fix table_format in [adapter], or the server's spark.sql.sources.default",
                )
        except BaseException:
            connection.close()
            raise
        return cls(name, connection, catalog, caps, staging_dir)

    def session(self) -> SparkSession:
        return SparkSession(self.connection.session(), self.staging_dir)

    def maintenance(self) -> Maintenance | None:
        return None

    def quote(self, identifier: str) -> str:
        return self.spark_dialect.quote(identifier)

    def qualified(self, schema: str, table: str, catalog: str | None = None) -> str:
        return ".".join(self.quote(p) for p in (catalog or self.catalog, schema, table))

    def _ns(self, schema: str, catalog: str | None) -> str:
        return f"{self.quote(catalog or self.catalog)}.{self.quote(schema)}"

    # ------------------------------------------------------------------ the catalog

    def describe(self, schema: str, table: str, catalog: str | None = None) -> list[Column]:
        try:
            fields = self.inner.run(lambda spark: spark.table(self.qualified(schema, table, catalog)).schema)
        except SparkAdapterError as exc:
            if _missing(exc):
                return []
            raise
        return [Column(f.name, f.dataType.simpleString(), bool(f.nullable)) for f in fields.fields]

    def table_exists(self, schema: str, table: str, catalog: str | None = None) -> bool:
        return any(r.name == table for r in self._relations(schema, catalog))

    def list_schemas(self, catalog: str | None = None) -> list[str]:
        rows = self.query(f"SHOW DATABASES IN {self.quote(catalog or self.catalog)}")
        return sorted(str(r[0]) for r in rows)

    def list_tables(self, schema: str, catalog: str | None = None) -> list[str]:
        return sorted(r.name for r in self._relations(schema, catalog) if r.kind == "table")

    def list_relations(self, catalog: str | None = None) -> list[Relation]:
        return [r for schema in self.list_schemas(catalog) for r in self._relations(schema, catalog)]

    def _relations(self, schema: str, catalog: str | None) -> list[Relation]:
        """Tables and views of one database (two statements: SHOW TABLES lists views too)."""
        cat = catalog or self.catalog
        ns = self._ns(schema, catalog)
        try:
            tables = self.query(f"SHOW TABLES IN {ns}")
            views = {str(r[1]) for r in self.query(f"SHOW VIEWS IN {ns}")}
        except SparkAdapterError as exc:
            if _missing(exc):
                return []  # dropped between the listing and now
            raise
        out: list[Relation] = []
        for _db, name, temporary in tables:
            text = str(name)
            if temporary or text.startswith(STAGE_PREFIX):
                continue
            out.append(Relation(cat, schema, text, "view" if text in views else "table"))
        return out

    def catalog_tables(self, catalog: str) -> list[CatalogTable]:
        # Spark keeps no row estimate a listing can read without scanning: unknown (None).
        return [
            CatalogTable(r.schema, r.name)
            for r in sorted(self.list_relations(catalog), key=lambda r: (r.schema, r.name))
            if r.kind == "table"
        ]

    def read_columns(self, catalog: str, schemas: Sequence[str]) -> TableColumns:
        out: TableColumns = {}
        for schema in sorted(schemas):
            for rel in self._relations(schema, catalog):
                columns = self.describe(schema, rel.name, catalog)
                if columns:
                    out[(schema, rel.name)] = columns
        return out

    def ensure_schema(self, schema: str, catalog: str | None = None) -> bool:
        if schema in self.list_schemas(catalog):
            return False
        self.execute(f"CREATE DATABASE IF NOT EXISTS {self._ns(schema, catalog)}")
        return True

    def close(self) -> None:
        self.connection.close()


def _missing(exc: SparkAdapterError) -> bool:
    return exc.failure_kind == "not-found" or any(m in (exc.error_class or "") for m in _MISSING)

