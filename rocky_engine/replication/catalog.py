"""Catalog reads of a replication run: one query for every table of a catalog, one for every column.

A run never lists the catalog per table (DESIGN.md "Performance"): the source tables come from one
query, and the columns of all source and target schemas from one query per warehouse.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from rocky_engine.adapters.base import Column, WarehouseAdapter, WarehouseSession

#: schemas that are never replication sources
SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "pg_toast"})

TableColumns = dict[tuple[str, str], list[Column]]


@dataclass(frozen=True, slots=True)
class CatalogTable:
    schema: str
    name: str
    row_count: int | None = None


def list_tables(adapter: WarehouseAdapter, catalog: str) -> list[CatalogTable]:
    """Every base table of ``catalog`` with its (estimated) row count, in one catalog query."""
    if adapter.type == "duckdb":
        rows = adapter.query(
            "SELECT schema_name, table_name, estimated_size FROM duckdb_tables() "
            "WHERE database_name = ? AND NOT temporary ORDER BY 1, 2",
            [catalog],
        )
        return [CatalogTable(str(r[0]), str(r[1]), _count(r[2])) for r in rows if r[0] not in SYSTEM_SCHEMAS]
    if adapter.type == "postgres":
        rows = adapter.query(
            "SELECT n.nspname, c.relname, c.reltuples::bigint FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%' "
            "ORDER BY 1, 2"
        )
        return [CatalogTable(str(r[0]), str(r[1]), _count(r[2])) for r in rows]
    return [
        CatalogTable(r.schema, r.name)
        for r in adapter.list_relations(catalog)
        if r.kind == "table" and r.schema not in SYSTEM_SCHEMAS
    ]


def read_columns(
    session: WarehouseSession, dialect: str, catalog: str, schemas: Collection[str]
) -> TableColumns:
    """Columns of every relation in ``schemas`` (ordered), keyed ``(schema, table)``; one query."""
    if not schemas:
        return {}
    names = sorted(schemas)
    marks = ", ".join("?" for _ in names)  # every adapter takes ? placeholders
    if dialect == "postgres":
        rows = session.query(
            "SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE c.relkind IN ('r', 'p', 'v', 'm') AND a.attnum > 0 AND NOT a.attisdropped "
            f"AND n.nspname IN ({marks}) ORDER BY n.nspname, c.relname, a.attnum",
            names,
        )
    else:
        rows = session.query(
            "SELECT schema_name, table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
            f"WHERE database_name = ? AND schema_name IN ({marks}) "
            "ORDER BY schema_name, table_name, column_index",
            [catalog, *names],
        )
    out: TableColumns = {}
    for schema, table, column, data_type, nullable in rows:
        column_info = Column(str(column), str(data_type), bool(nullable))
        out.setdefault((str(schema), str(table)), []).append(column_info)
    return out


def _count(value: object) -> int | None:
    if isinstance(value, int) and value >= 0:
        return value
    return None
