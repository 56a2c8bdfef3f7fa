"""Column types in one canonical form every dialect reads into and renders from, and the widening rule.

``SqlType`` is a family (``int``, ``float``, ``decimal``, ``string``, ``bool``, ``date``, ``time``,
``timestamp``, ``timestamptz``, ``blob``, ``uuid``, ``json``, ``interval``; ``other`` keeps the spelling of
anything else) with its size. A dialect (``adapters.dialect``) parses its own spellings into it, renders it
back in DDL, and says which of two warehouses' types a copied column gets.

Drift compares the type a target column *should* have with the type it has. Equal: nothing to do. A safe
widening of the target (INTEGER -> BIGINT, SMALLINT -> INTEGER, FLOAT -> DOUBLE, VARCHAR(n) -> VARCHAR(m >=
n) or unbounded, DECIMAL(p,s) -> DECIMAL(p2,s2) keeping every digit, DATE -> TIMESTAMP, see
``is_widening``): ``ALTER COLUMN ... TYPE``. Anything else (a narrowing included) rebuilds the table.

One family exists only on the wire of a cross-warehouse copy: ``hex``, binary values as text in the
``\\x`` + lowercase hex form (what PostgreSQL's ``bytea`` reads from CSV).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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


#: binary as ``\\x``-prefixed lowercase hex text: a wire form of a copy, never a column type
HEX_TEXT = SqlType("hex")
#: unbounded text
TEXT = SqlType("string")


def parse_type(text: str) -> SqlType:
    """Read a type as DuckDB, PostgreSQL or ANSI spell it (``DECIMAL(10,2)``, ``character varying(20)``)."""
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


def render_by_names(
    t: SqlType, ints: Mapping[int, str], wide_int: str, names: Mapping[str, str]
) -> str:
    """A type as SQL for warehouses that share DuckDB's naming shape (FLOAT/DOUBLE, DECIMAL(p,s) up to 38).

    Each dialect brings its own names: ``ints`` by bit size, ``wide_int`` for an integer wider than them,
    ``names`` for the families without parameters; a wider decimal is stored as DOUBLE.
    """
    f = t.family
    if f == "int":
        return ints.get(t.size or 32, wide_int)
    if f == "float":
        return "FLOAT" if t.size == 32 else "DOUBLE"
    if f == "decimal":
        if t.size is None or t.size > 38:
            return "DOUBLE"
        return f"DECIMAL({t.size},{t.scale or 0})"
    if f == "other":
        return t.raw
    return names[f]
