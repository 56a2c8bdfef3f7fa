"""The built-in table checks of ``[pipeline.NAME.checks]``: row_count, column_match, freshness, null_rate
and custom SQL.

Each function returns the check dicts of CONTRACT section 3 (``{name, passed, severity, ...detail}``). A
statement the warehouse rejects fails the check with the warehouse's message in ``error``; it never raises.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rocky_engine.adapters.base import WarehouseSession, quote_ident
from rocky_engine.checks.sql import as_utc, columns_of, plain_number, scalar
from rocky_engine.config.checks import ColumnMatchCheck, CustomCheck, FreshnessCheck, NullRateCheck
from rocky_engine.errors import AdapterError

#: row_count and column_match fail a gate unless configured otherwise (CONTRACT section 1)
ROW_COUNT_SEVERITY = "error"


def count_rows(session: WarehouseSession, qualified: str) -> int:
    """``COUNT(*)`` of a relation (raises AdapterError when the warehouse refuses)."""
    return int(scalar(session.query(f"SELECT COUNT(*) FROM {qualified}")) or 0)


def check_row_count(
    target_count: int | None,
    target_error: str | None,
    source: tuple[WarehouseSession, str] | None,
) -> dict[str, Any]:
    """Source and target row counts agree; without a source, the count is reported and passes."""
    check: dict[str, Any] = {"name": "row_count", "passed": False, "severity": ROW_COUNT_SEVERITY}
    if target_error is not None or target_count is None:
        check["error"] = target_error or "target row count unavailable"
        return check
    if source is None:
        check.update(passed=True, target_count=target_count)
        return check
    session, qualified = source
    try:
        source_count = count_rows(session, qualified)
    except AdapterError as exc:
        check.update(target_count=target_count, error=f"source: {exc.message}")
        return check
    check.update(passed=source_count == target_count, source_count=source_count, target_count=target_count)
    return check


def check_column_match(
    config: ColumnMatchCheck,
    target: tuple[WarehouseSession, str],
    source: tuple[WarehouseSession, str],
    ignore: list[str],
) -> dict[str, Any]:
    """Source and target have the same column names (case-insensitive; ``ignore`` lists columns the
    pipeline adds to the target itself, such as metadata columns)."""
    check: dict[str, Any] = {"name": "column_match", "passed": False, "severity": config.severity}
    try:
        source_cols = columns_of(*source)
        target_cols = columns_of(*target)
    except AdapterError as exc:
        check["error"] = exc.message
        return check
    skip = {c.lower() for c in ignore}
    source_names = {c.lower(): c for c in source_cols if c.lower() not in skip}
    target_names = {c.lower(): c for c in target_cols if c.lower() not in skip}
    missing = [source_names[k] for k in source_names if k not in target_names]
    extra = [target_names[k] for k in target_names if k not in source_names]
    check.update(passed=not missing and not extra, missing=missing, extra=extra)
    return check


def check_freshness(
    session: WarehouseSession, config: FreshnessCheck, qualified: str, column: str, now: datetime
) -> dict[str, Any]:
    """``now - MAX(column)`` is at most ``threshold_seconds``; an empty table is not fresh."""
    check: dict[str, Any] = {"name": "freshness", "passed": False, "severity": config.severity}
    try:
        newest = scalar(session.query(f"SELECT MAX({quote_ident(column)}) FROM {qualified}"))
    except AdapterError as exc:
        check.update(threshold_seconds=config.threshold_seconds, error=exc.message)
        return check
    moment = as_utc(newest)
    if moment is None:
        reason = "no rows" if newest is None else f"MAX({column}) = {newest!r} is not a timestamp"
        check.update(threshold_seconds=config.threshold_seconds, error=reason)
        return check
    lag = int((as_utc(now) or now).timestamp() - moment.timestamp())
    check.update(
        passed=lag <= config.threshold_seconds, lag_seconds=lag, threshold_seconds=config.threshold_seconds
    )
    return check


def check_null_rate(session: WarehouseSession, config: NullRateCheck, qualified: str) -> list[dict[str, Any]]:
    """One check per column: the share of NULLs is at most ``threshold``.

    All columns are counted in one statement; when it fails (a missing column), each column is retried
    alone so the error lands on the column that caused it.
    """
    counts = ", ".join(f"COUNT({quote_ident(c)})" for c in config.columns)
    try:
        rows = session.query(f"SELECT COUNT(*), {counts} FROM {qualified}")
        total, *present = (int(plain_number(v) or 0) for v in rows[0])
        return [_null_rate(config, c, total, p) for c, p in zip(config.columns, present, strict=True)]
    except AdapterError:
        pass
    checks = []
    for column in config.columns:
        try:
            row = session.query(f"SELECT COUNT(*), COUNT({quote_ident(column)}) FROM {qualified}")[0]
        except AdapterError as exc:
            checks.append(
                {"name": "null_rate", "passed": False, "severity": config.severity, "column": column,
                 "threshold": config.threshold, "error": exc.message}
            )
            continue
        checks.append(_null_rate(config, column, int(row[0]), int(row[1])))
    return checks


def _null_rate(config: NullRateCheck, column: str, total: int, present: int) -> dict[str, Any]:
    rate = 0.0 if total == 0 else (total - present) / total
    return {
        "name": "null_rate",
        "passed": rate <= config.threshold,
        "severity": config.severity,
        "column": column,
        "null_rate": round(rate, 6),
        "threshold": config.threshold,
    }


def check_custom(session: WarehouseSession, config: CustomCheck, qualified: str) -> dict[str, Any]:
    """A user query (``{target}`` -> the table) whose single value must not exceed ``threshold``.

    A NULL result (an aggregate over no rows) counts as zero.
    """
    query = config.sql.replace("{target}", qualified)
    check: dict[str, Any] = {
        "name": config.name, "passed": False, "severity": config.severity, "query": query,
    }
    try:
        value = scalar(session.query(query))
    except AdapterError as exc:
        check["error"] = exc.message
        return check
    check["result_value"] = value
    try:
        check["passed"] = float(value or 0) <= float(config.threshold)
    except (TypeError, ValueError):
        check["error"] = f"query returned {value!r}, not a number"
    return check
