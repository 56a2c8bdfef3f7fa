"""Column types across DuckDB and PostgreSQL: one canonical form, rendering per dialect, widening rules.

Drift compares the type a target column *should* have (the source type rendered for the target dialect)
with the type it has. Equal: nothing to do. A safe widening of the target (INTEGER -> BIGINT,
SMALLINT -> INTEGER, FLOAT -> DOUBLE, VARCHAR(n) -> VARCHAR(m >= n) or unbounded, DECIMAL(p,s) ->
DECIMAL(p2,s2) keeping every digit, DATE -> TIMESTAMP): ``ALTER COLUMN ... TYPE``. Anything else (a
narrowing included) rebuilds the table, so the target keeps the source's types.

Across dialects some families have no faithful twin; they travel as text (``uuid``/``json``/``interval``
into PostgreSQL stay typed, nested and unknown types become text), and PostgreSQL's unbounded
``numeric`` becomes ``DOUBLE`` in DuckDB, whose decimals stop at 38 digits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PARAMS = re.compile(r"^(?P<base>[a-z_ ]+?)\s*\((?P<args>[0-9 ,]+)\)$")

_INT_NAMES = {
    "tinyint": 8, "int1": 8, "smallint": 16, "int2": 16, "short": 16, "integer": 32, "int": 32, "int4": 32,
    "signed": 32, "bigint": 64, "int8": 64, "long": 64, "hugeint": 128, "int128": 128,
}
_FLOAT_NAMES = {"float": 32, "real": 32, "float4": 32, "double": 64, "double precision": 64, "float8": 64}
_STRING_NAMES = {"varchar", "character varying", "text", "string", "char", "character", "bpchar", "nvarchar"}
_TS_NAMES = {
    "timestamp": "timestamp", "timestamp without time zone": "timestamp", "datetime": "timestamp",
    "timestamp with time zone": "timestamptz", "timestamptz": "timestamptz",
    "time": "time", "time without time zone": "time",
}
_SIMPLE = {
    "boolean": "bool", "bool": "bool", "logical": "bool", "date": "date", "blob": "blob", "bytea": "blob",
    "binary": "blob", "varbinary": "blob", "uuid": "uuid", "json": "json", "jsonb": "json",
    "interval": "interval",
}

@dataclass(frozen=True, slots=True)
class SqlType:
    """A canonical column type. ``size``: integer/float bits, string length, decimal precision."""

    family: str
    size: int | None = None
    scale: int | None = None
    raw: str = ""

    @property
    def signature(self) -> tuple[str, int | None, int | None, str]:
        return (self.family, self.size, self.scale, self.raw if self.family == "other" else "")


def parse_type(text: str) -> SqlType:
    """Read a type as DuckDB or PostgreSQL spell it (``DECIMAL(10,2)``, ``character varying(20)``, ...)."""
    raw = text.strip()
    low = " ".join(raw.lower().split())
    base, args = low, ""
    match = _PARAMS.match(low)
    if match:
        base, args = match.group("base").strip(), match.group("args")
    nums = [int(a) for a in args.replace(" ", "").split(",") if a] if args else []
    if base in _INT_NAMES and not nums:
        return SqlType("int", _INT_NAMES[base])
    if base in _FLOAT_NAMES and not nums:
        return SqlType("float", _FLOAT_NAMES[base])
    if base in ("decimal", "numeric"):
        if not nums:
            return SqlType("decimal")
        return SqlType("decimal", nums[0], nums[1] if len(nums) > 1 else 0)
    if base in _STRING_NAMES:
        return SqlType("string", nums[0] if nums else None)
    if base in _TS_NAMES or re.sub(r"\(\d+\)", "", low) in _TS_NAMES:
        return SqlType(_TS_NAMES.get(base) or _TS_NAMES[re.sub(r"\(\d+\)", "", low)])
    if base in _SIMPLE and not nums:
        return SqlType(_SIMPLE[base])
    return SqlType("other", raw=raw)


def render_type(t: SqlType, dialect: str) -> str:
    """The type as ``dialect`` spells it in DDL."""
    if dialect == "postgres":
        return _render_pg(t)
    return _render_duckdb(t)


def _render_duckdb(t: SqlType) -> str:
    f = t.family
    if f == "int":
        return {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}.get(t.size or 32, "HUGEINT")
    if f == "float":
        return "FLOAT" if t.size == 32 else "DOUBLE"
    if f == "decimal":
        if t.size is None or t.size > 38:
            return "DOUBLE"
        return f"DECIMAL({t.size},{t.scale or 0})"
    if f == "other":
        return t.raw
    return {
        "string": "VARCHAR", "bool": "BOOLEAN", "date": "DATE", "time": "TIME", "timestamp": "TIMESTAMP",
        "timestamptz": "TIMESTAMP WITH TIME ZONE", "blob": "BLOB", "uuid": "UUID", "json": "JSON",
        "interval": "INTERVAL",
    }[f]


def _render_pg(t: SqlType) -> str:
    f = t.family
    if f == "int":
        return {8: "smallint", 16: "smallint", 32: "integer", 64: "bigint"}.get(t.size or 32, "numeric(38,0)")
    if f == "float":
        return "real" if t.size == 32 else "double precision"
    if f == "decimal":
        return "numeric" if t.size is None else f"numeric({t.size},{t.scale or 0})"
    if f == "string":
        return "text" if t.size is None else f"varchar({t.size})"
    if f == "other":
        return t.raw
    return {
        "bool": "boolean", "date": "date", "time": "time", "timestamp": "timestamp",
        "timestamptz": "timestamptz", "blob": "bytea", "uuid": "uuid", "json": "jsonb",
        "interval": "interval",
    }[f]


def target_type(source: str, source_dialect: str, target_dialect: str) -> SqlType:
    """The canonical type a target column gets when the table is created from ``source``."""
    t = parse_type(source)
    if source_dialect == target_dialect:
        return t
    if t.family == "other":
        return SqlType("string")
    if target_dialect == "duckdb" and t.family == "decimal" and (t.size is None or t.size > 38):
        return SqlType("float", 64)
    if target_dialect == "postgres" and t.family == "int" and (t.size or 0) > 64:
        return SqlType("decimal", 38, 0)
    if target_dialect == "duckdb" and t.family == "string":
        return SqlType("string")  # DuckDB ignores VARCHAR lengths
    return t


def same_type(expected: SqlType, actual: SqlType, dialect: str) -> bool:
    """Whether a target column of type ``actual`` already is ``expected`` (as the dialect stores it)."""
    if expected.signature == actual.signature:
        return True
    return render_type(expected, dialect).lower() == render_type(actual, dialect).lower()


def is_widening(old: SqlType, new: SqlType) -> bool:
    """Whether ``old`` can become ``new`` in place without losing any value it may hold."""
    if old.family == new.family:
        if old.family in ("int", "float"):
            return (new.size or 0) > (old.size or 0)
        if old.family == "string":
            return new.size is None or (old.size is not None and new.size >= old.size)
        if old.family == "decimal":
            if old.size is None or new.size is None:
                return new.size is None and old.size is not None
            old_scale, new_scale = old.scale or 0, new.scale or 0
            return new_scale >= old_scale and new.size - new_scale >= old.size - old_scale and \
                (new.size, new_scale) != (old.size, old_scale)
        return False
    return old.family == "date" and new.family in ("timestamp", "timestamptz")
