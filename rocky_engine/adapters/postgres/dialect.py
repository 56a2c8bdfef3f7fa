"""PostgreSQL's SQL: transactional DDL, views that pin their tables, its type names, text on the wire.

PostgreSQL records view dependencies, so replacing a table or a view is more than one statement here
(``adapters.postgres.refresh``). Its Arrow path reads and loads through ``COPY ... (FORMAT csv)``
(``copy_reader``, ``arrow``), so types without a plain Arrow twin (uuid, json, interval, anything unknown)
travel as text, binary as ``\\x`` hex text, and decimals wider than Arrow's 38 digits as DOUBLE.
"""

from __future__ import annotations

from rocky_engine.adapters.base import TableName, WarehouseSession
from rocky_engine.adapters.dialect import Capabilities, Dialect
from rocky_engine.adapters.sql_types import HEX_TEXT, TEXT, SqlType

_INT_NAMES = {8: "smallint", 16: "smallint", 32: "integer", 64: "bigint"}
_SIMPLE_NAMES = {
    "bool": "boolean", "date": "date", "time": "time", "timestamp": "timestamp",
    "timestamptz": "timestamptz", "blob": "bytea", "uuid": "uuid", "json": "jsonb",
    "interval": "interval", "hex": "text",
}
#: families that reach a CSV load, or leave the CSV reader, only as their text form
_AS_TEXT = frozenset({"uuid", "json", "interval", "other"})


class PostgresDialect(Dialect):
    name = "postgres"
    capabilities = Capabilities(
        merge=True,
        replace_table_statement=False,
        transactional_ddl=True,
        insert_by_name=False,
        single_catalog=True,
        reads_local_files=False,
    )

    def render_type(self, t: SqlType) -> str:
        f = t.family
        if f == "int":
            return _INT_NAMES.get(t.size or 32, "numeric(38,0)")
        if f == "float":
            return "real" if t.size == 32 else "double precision"
        if f == "decimal":
            return "numeric" if t.size is None else f"numeric({t.size},{t.scale or 0})"
        if f == "string":
            return "text" if t.size is None else f"varchar({t.size})"
        if f == "other":
            return t.raw
        return _SIMPLE_NAMES[f]

    def storable(self, t: SqlType) -> SqlType:
        if t.family == "int" and (t.size or 0) > 64:
            return SqlType("decimal", 38, 0)
        return t

    def export_type(self, t: SqlType) -> SqlType:
        if t.family in _AS_TEXT:
            return TEXT
        if t.family == "decimal" and (t.size is None or t.size > 38):
            return SqlType("float", 64)
        return t

    def ingest_type(self, t: SqlType) -> SqlType:
        if t.family in _AS_TEXT:
            return TEXT
        if t.family == "blob":
            return HEX_TEXT  # bytea's text input form, so the CSV carries it intact
        return t

    def export_item(self, name: str, source: SqlType, wire: SqlType) -> str:
        if wire == HEX_TEXT and source.family == "blob":
            col = self.quote(name)
            return f"'\\x' || encode({col}, 'hex') AS {col}"
        return super().export_item(name, source, wire)

    def create_or_replace_as_select(
        self, session: WarehouseSession, table: TableName, select: str, *, exists_as: str | None = None
    ) -> int | None:
        from rocky_engine.adapters.postgres.refresh import replace_table

        return replace_table(session, table, select, exists_as)

    def create_or_replace_view(
        self, session: WarehouseSession, table: TableName, select: str, *, exists_as: str | None = None
    ) -> None:
        if exists_as == "table":
            super().create_or_replace_view(session, table, select, exists_as=exists_as)
            return
        from rocky_engine.adapters.postgres.refresh import replace_view

        replace_view(session, table, select)

    def stage_as_select(self, session: WarehouseSession, name: str, select: str) -> None:
        # ON COMMIT DROP: the stage never outlives the unit, even when a retry runs it again.
        session.execute(f"CREATE TEMP TABLE {self.quote(name)} ON COMMIT DROP AS {select}")

    def drop_stage(self, session: WarehouseSession, name: str) -> None:
        return None  # dropped by the commit (ON COMMIT DROP)


DIALECT = PostgresDialect()
