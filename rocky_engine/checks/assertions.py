"""Declarative assertions (``[[pipeline.NAME.checks.assertions]]``): one SQL statement each.

Row-level assertions count the rows that break them (``failing_rows``); table-level ones
(``row_count_range``, ``aggregate``) read one value and fail with ``failing_rows = 1``. A ``filter``
predicate restricts the rows looked at before anything else. A statement the warehouse rejects (a missing
column, a bad expression) fails that assertion with the warehouse's message in ``error``; it never stops
the run.

Semantics worth knowing:

- ``unique`` counts every row whose non-NULL value occurs more than once; ``composite`` does the same for
  a combination of columns (NULLs compare equal there, as in GROUP BY).
- ``expression`` fails the rows where the expression is false (NULL passes, as in dbt).
- ``not_in_future`` and ``older_than_n_days`` compare with the run's clock in UTC; naive timestamps are
  taken to be UTC. ``older_than_n_days`` fails rows older than ``days`` days (a retention rule).
- ``regex_match`` is a search (``~`` on DuckDB and PostgreSQL, ``RLIKE`` on Spark: the dialect's
  ``regex_search``); anchor with ``^...$``.

Identifiers and the few non-ANSI spellings go through the warehouse's dialect (backticks on Spark); a
caller without one gets the ANSI dialect, which DuckDB and PostgreSQL speak.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.dialect import ANSI, Dialect
from rocky_engine.checks.sql import plain_number, sibling, sql_literal, timestamp_literal
from rocky_engine.config.checks import Assertion
from rocky_engine.errors import AdapterError
from rocky_engine.wire.checks import (
    ASSERTION_BY_KIND,
    AggregateAssertion,
    AssertionCheck,
    CompositeAssertion,
    RowCountRangeAssertion,
)

_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "=": operator.eq,
    "!=": operator.ne,
}

#: assertion types that look at the whole table rather than counting rows
TABLE_LEVEL = frozenset({"row_count_range", "aggregate"})


def assertion_applies(assertion_table: str, table_parts: Sequence[str]) -> bool:
    """Whether an assertion's ``table`` (``table``, ``schema.table`` or ``catalog.schema.table``) names
    the table whose key parts are ``table_parts`` (``[catalog, schema, table]``)."""
    wanted = assertion_table.split(".")
    if len(wanted) > len(table_parts):
        return False
    return list(table_parts[len(table_parts) - len(wanted):]) == wanted


def assertion_sql(assertion: Assertion, qualified: str, now: datetime, dialect: Dialect = ANSI) -> str:
    """The one statement behind ``assertion`` on the table ``qualified``, in ``dialect``.

    Row-level statements return the failing row count; table-level ones return the observed value.
    """
    a = assertion
    quote_ident = dialect.quote
    where = f"({a.filter})" if a.filter else "TRUE"
    col = quote_ident(a.column) if a.column else ""
    kind = a.type
    if kind == "not_null":
        return _count(qualified, where, f"{col} IS NULL")
    if kind == "unique":
        return _duplicates(qualified, where, [col], f"{col} IS NOT NULL")
    if kind == "composite":
        cols = [quote_ident(c) for c in a.columns or []]
        return _duplicates(qualified, where, cols, "TRUE")
    if kind == "accepted_values":
        values = ", ".join(sql_literal(v, dialect) for v in a.values or [])
        return _count(qualified, where, f"{col} IS NOT NULL AND {col} NOT IN ({values})")
    if kind == "relationships":
        parent = sibling(qualified, a.to_table or "", dialect.quote)
        to_col = quote_ident(a.to_column or "")
        return (
            f"SELECT COUNT(*) FROM {qualified} AS child WHERE {where} AND child.{col} IS NOT NULL "
            f"AND NOT EXISTS (SELECT 1 FROM {parent} AS parent WHERE parent.{to_col} = child.{col})"
        )
    if kind == "expression":
        return _count(qualified, where, f"NOT ({a.expression})")
    if kind == "in_range":
        bounds = []
        if a.min is not None:
            bounds.append(f"{col} < {sql_literal(a.min, dialect)}")
        if a.max is not None:
            bounds.append(f"{col} > {sql_literal(a.max, dialect)}")
        return _count(qualified, where, f"{col} IS NOT NULL AND ({' OR '.join(bounds)})")
    if kind == "regex_match":
        pattern = sql_literal(a.pattern or "", dialect)
        matches = dialect.regex_search(dialect.cast_text(col), pattern)
        return _count(qualified, where, f"{col} IS NOT NULL AND NOT ({matches})")
    if kind == "not_in_future":
        return _count(qualified, where, f"{col} > {timestamp_literal(now)}")
    if kind == "older_than_n_days":
        cutoff = now - timedelta(days=a.days or 0)
        return _count(qualified, where, f"{col} < {timestamp_literal(cutoff)}")
    if kind == "row_count_range":
        return f"SELECT COUNT(*) FROM {qualified} WHERE {where}"
    if kind == "aggregate":
        op = (a.op or "count").upper()
        arg = col if a.column else "*"
        return f"SELECT {op}({arg}) FROM {qualified} WHERE {where}"
    raise ValueError(f"unknown assertion type {kind}")


def _count(qualified: str, where: str, failing: str) -> str:
    return f"SELECT COUNT(*) FROM {qualified} WHERE {where} AND ({failing})"


def _duplicates(qualified: str, where: str, cols: list[str], keep: str) -> str:
    group = ", ".join(cols)
    return (
        f"SELECT COALESCE(SUM(n), 0) FROM (SELECT COUNT(*) AS n FROM {qualified} "
        f"WHERE {where} AND {keep} GROUP BY {group} HAVING COUNT(*) > 1) AS dup"
    )


def run_assertion(
    session: WarehouseSession, assertion: Assertion, qualified: str, now: datetime, dialect: Dialect = ANSI
) -> AssertionCheck:
    """Run one assertion; its typed check ``{name, passed, severity, kind, column?, failing_rows, ...}``."""
    a = assertion
    check = ASSERTION_BY_KIND[a.type](name=a.display_name, passed=False, severity=a.severity, kind=a.type)
    if a.column:
        check.column = a.column
    if isinstance(check, CompositeAssertion):
        check.columns = list(a.columns or [])
    if a.filter:
        check.filter = a.filter
    try:
        rows = session.query(assertion_sql(a, qualified, now, dialect))
    except AdapterError as exc:
        check.error = exc.message
        return check
    value = plain_number(rows[0][0]) if rows and rows[0] else None
    if isinstance(check, RowCountRangeAssertion | AggregateAssertion):
        ok = _table_level_ok(a, value)
        check.failing_rows = 0 if ok else 1
        if isinstance(check, RowCountRangeAssertion):
            check.row_count = value
            if a.min is not None:
                check.min = a.min
            if a.max is not None:
                check.max = a.max
        else:
            check.actual, check.op, check.cmp, check.value = value, a.op, a.cmp, a.value
    else:
        failing = int(value or 0)
        check.failing_rows = failing
        ok = failing == 0
    check.passed = ok
    return check


def _table_level_ok(a: Assertion, value: Any) -> bool:
    if value is None:
        # An aggregate over no rows is NULL: nothing proves the assertion, so it does not pass.
        return False
    try:
        if a.type == "row_count_range":
            count = int(value)
            low = _number(a.min)
            high = _number(a.max)
            return (low is None or count >= low) and (high is None or count <= high)
        compare = _CMP[a.cmp or "="]
        return bool(compare(float(value), float(a.value if a.value is not None else 0)))
    except (TypeError, ValueError):
        # A non-numeric bound or aggregate (min/max of text) cannot be compared: it does not pass.
        return False


def _number(value: int | float | str | None) -> float | None:
    if value is None:
        return None
    return float(value)


def run_assertions(
    session: WarehouseSession,
    assertions: Sequence[Assertion],
    qualified: str,
    now: datetime,
    dialect: Dialect = ANSI,
) -> list[AssertionCheck]:
    """Run every assertion in order (each contained: one failing never stops the next)."""
    return [run_assertion(session, a, qualified, now, dialect) for a in assertions]
