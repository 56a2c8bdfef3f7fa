"""DuckDB's SQL: one-statement replaces, ``INSERT ... BY NAME``, its type names, 38-digit decimals.

DuckDB ignores VARCHAR lengths and stops decimals at 38 digits, so a copied unbounded or wider decimal is
stored as DOUBLE and every string as VARCHAR. Its Arrow export and import carry every type, so a copy
casts nothing on the way in or out except binary for a warehouse that reads it as hex text.
"""

from __future__ import annotations

from collections.abc import Sequence

from rocky_engine.adapters.base import Column, WarehouseSession
from rocky_engine.adapters.dialect import Capabilities, Dialect
from rocky_engine.adapters.sql_types import HEX_TEXT, TEXT, SqlType, render_by_names

_INT_NAMES = {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}
_SIMPLE_NAMES = {
    "string": "VARCHAR", "bool": "BOOLEAN", "date": "DATE", "time": "TIME", "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMP WITH TIME ZONE", "blob": "BLOB", "uuid": "UUID", "json": "JSON",
    "interval": "INTERVAL", "hex": "VARCHAR",
}


class DuckDbDialect(Dialect):
    name = "duckdb"
    capabilities = Capabilities(
        merge=True,
        replace_table_statement=True,
        transactional_ddl=True,
        insert_by_name=True,
        single_catalog=False,
        reads_local_files=True,
    )

    def render_type(self, t: SqlType) -> str:
        return render_by_names(t, _INT_NAMES, "HUGEINT", _SIMPLE_NAMES)

    def storable(self, t: SqlType) -> SqlType:
        if t.family == "decimal" and (t.size is None or t.size > 38):
            return SqlType("float", 64)
        if t.family == "string":
            return TEXT  # DuckDB ignores VARCHAR lengths
        return t

    def export_item(self, name: str, source: SqlType, wire: SqlType) -> str:
        if wire == HEX_TEXT and source.family == "blob":
            col = self.quote(name)
            return f"CASE WHEN {col} IS NULL THEN NULL ELSE '\\x' || lower(hex({col})) END AS {col}"
        return super().export_item(name, source, wire)

    def scan_files(
        self, fmt: str, paths: Sequence[str], *, union_by_name: bool = False,
        csv_delimiter: str | None = None, csv_header: bool | None = None,
    ) -> str:
        quoted = [self.literal(p) for p in paths]
        where = quoted[0] if len(quoted) == 1 else f"[{', '.join(quoted)}]"
        options = ", union_by_name = true" if union_by_name else ""
        if fmt == "parquet":
            return f"read_parquet({where}{options})"
        if fmt == "jsonl":
            return f"read_json_auto({where}, format = 'newline_delimited'{options})"
        if fmt == "csv":
            if csv_delimiter is not None:
                options += f", delim = {self.literal(csv_delimiter)}"
            if csv_header is not None:
                options += f", header = {'true' if csv_header else 'false'}"
            return f"read_csv_auto({where}{options})"
        return super().scan_files(fmt, paths, union_by_name=union_by_name)

    def describe_select(self, session: WarehouseSession, select: str) -> list[Column]:
        return [Column(str(row[0]), str(row[1])) for row in session.query(f"DESCRIBE {select}")]


DIALECT = DuckDbDialect()
