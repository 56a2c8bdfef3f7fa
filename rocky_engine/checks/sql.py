"""Small SQL helpers shared by checks and assertions: literals, qualified names, result scalars.

Checks build their statements as text (no bind parameters): DuckDB takes ``?`` and psycopg ``%s``, so a
placeholder would tie a check to one dialect, while a literal rendered by the warehouse's dialect runs on
any (Spark reads backslash escapes in literals, DuckDB and PostgreSQL do not: ``Dialect.literal``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from rocky_engine.adapters.base import WarehouseSession, quote_ident
from rocky_engine.adapters.dialect import ANSI, Dialect


def sql_literal(value: int | float | str | bool | None, dialect: Dialect) -> str:
    """A SQL literal for ``value`` in ``dialect`` (strings: ``dialect.literal``, the warehouse's one rule)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return dialect.literal(str(value))


def timestamp_literal(moment: datetime) -> str:
    """``TIMESTAMP '...'`` of ``moment`` in UTC without offset (the engine treats naive values as UTC)."""
    utc = moment.astimezone(UTC) if moment.tzinfo is not None else moment
    return f"TIMESTAMP '{utc.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def split_qualified(qualified: str, quote: str = '"') -> list[str]:
    """Split a (possibly quoted) dotted name into its parts: ``"a"."b""c".d`` -> ``[a, b"c, d]``
    (``quote``: the dialect's identifier quote, a backtick on Spark)."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    quoted_part = False
    while i < len(qualified):
        ch = qualified[i]
        if ch == quote:
            quoted_part = True
            i += 1
            while i < len(qualified):
                if qualified[i] == quote:
                    if i + 1 < len(qualified) and qualified[i + 1] == quote:
                        current.append(quote)
                        i += 2
                        continue
                    break
                current.append(qualified[i])
                i += 1
        elif ch == ".":
            parts.append("".join(current) if quoted_part else "".join(current).strip())
            current = []
            quoted_part = False
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current) if quoted_part else "".join(current).strip())
    return parts


def join_qualified(parts: list[str], quote: Callable[[str], str] = quote_ident) -> str:
    return ".".join(quote(p) for p in parts)


def sibling(qualified: str, name: str, quote: Callable[[str], str] = quote_ident) -> str:
    """Resolve ``name`` (``table``, ``schema.table`` or ``catalog.schema.table``) next to ``qualified``.

    The missing leading parts come from ``qualified``; a name with more parts than ``qualified`` (a
    three-part name against PostgreSQL's two-part names) drops its catalog. ``quote`` is the dialect's
    (``qualified`` is quoted with it; ``name`` is what a user wrote, in that dialect's quotes too).
    """
    mark = quote("")[0]
    base = split_qualified(qualified, mark)
    wanted = split_qualified(name, mark)
    if len(wanted) >= len(base):
        return join_qualified(wanted[len(wanted) - len(base):], quote)
    return join_qualified(base[: len(base) - len(wanted)] + wanted, quote)


def columns_of(session: WarehouseSession, qualified: str) -> list[str]:
    """Column names of a relation, in order, from ``information_schema`` (empty when it does not exist).

    Two-part names (PostgreSQL's ``qualified()`` drops the catalog) are looked up by schema and table only.
    ANSI literals and quotes: ``information_schema`` is where the ANSI dialect is spoken (Spark has none).
    """
    parts = split_qualified(qualified)
    table = parts[-1]
    conditions = [f"table_name = {ANSI.literal(table)}"]
    if len(parts) >= 2:
        conditions.append(f"table_schema = {ANSI.literal(parts[-2])}")
    if len(parts) >= 3:
        conditions.append(f"table_catalog = {ANSI.literal(parts[-3])}")
    rows = session.query(
        "SELECT column_name FROM information_schema.columns WHERE "
        + " AND ".join(conditions)
        + " ORDER BY ordinal_position"
    )
    return [str(r[0]) for r in rows]


def scalar(rows: list[tuple[Any, ...]]) -> Any:
    """The first value of the first row, with Decimal turned into a JSON-friendly int/float."""
    if not rows or not rows[0]:
        return None
    return plain_number(rows[0][0])


def plain_number(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def as_utc(value: Any) -> datetime | None:
    """A warehouse timestamp (aware, naive = UTC, date, ISO text or epoch seconds) as an aware datetime."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), tz=UTC)
    if isinstance(value, str):
        try:
            return as_utc(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None
