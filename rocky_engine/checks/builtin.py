"""The built-in table checks of ``[pipeline.NAME.checks]``: row_count, column_match, freshness, null_rate
and custom SQL.

Each function returns the typed check of its kind (``rocky_engine.wire.checks``; CONTRACT section 3). A
statement the warehouse rejects fails the check with the warehouse's message in ``error``; it never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from rocky_engine.adapters.base import WarehouseSession, quote_ident
from rocky_engine.checks.sql import as_utc, columns_of, plain_number, scalar
from rocky_engine.config import checks as config
from rocky_engine.errors import AdapterError
from rocky_engine.wire.checks import (
    ColumnMatchCheck,
    CustomCheck,
    FreshnessCheck,
    NullRateCheck,
    RowCountCheck,
)

#: row_count and column_match fail a gate unless configured otherwise (CONTRACT section 1)
ROW_COUNT_SEVERITY = "error"


def count_rows(session: WarehouseSession, qualified: str) -> int:
    """``COUNT(*)`` of a relation (raises AdapterError when the warehouse refuses)."""
    return int(scalar(session.query(f"SELECT COUNT(*) FROM {qualified}")) or 0)


def check_row_count(
    target_count: int | None,
    target_error: str | None,
    source: tuple[WarehouseSession, str] | None,
) -> RowCountCheck:
    """Source and target row counts agree; without a source, the count is reported and passes."""
    if target_error is not None or target_count is None:
        return RowCountCheck(
            passed=False, severity=ROW_COUNT_SEVERITY, error=target_error or "target row count unavailable"
        )
    if source is None:
        return RowCountCheck(passed=True, severity=ROW_COUNT_SEVERITY, target_count=target_count)
    session, qualified = source
    try:
        source_count = count_rows(session, qualified)
    except AdapterError as exc:
        return RowCountCheck(passed=False, severity=ROW_COUNT_SEVERITY, target_count=target_count,
                             error=f"source: {exc.message}")
    return RowCountCheck(
        passed=source_count == target_count, severity=ROW_COUNT_SEVERITY, source_count=source_count,
        target_count=target_count,
    )


def check_column_match(
    cfg: config.ColumnMatchCheck,
    target: tuple[WarehouseSession, str],
    source: tuple[WarehouseSession, str],
    ignore: list[str],
) -> ColumnMatchCheck:
    """Source and target have the same column names (case-insensitive; ``ignore`` lists columns the
    pipeline adds to the target itself, such as metadata columns)."""
    try:
        source_cols = columns_of(*source)
        target_cols = columns_of(*target)
    except AdapterError as exc:
        return ColumnMatchCheck(passed=False, severity=cfg.severity, error=exc.message)
    skip = {c.lower() for c in ignore}
    source_names = {c.lower(): c for c in source_cols if c.lower() not in skip}
    target_names = {c.lower(): c for c in target_cols if c.lower() not in skip}
    missing = [source_names[k] for k in source_names if k not in target_names]
    extra = [target_names[k] for k in target_names if k not in source_names]
    return ColumnMatchCheck(
        passed=not missing and not extra, severity=cfg.severity, missing=missing, extra=extra
    )


def check_freshness(
    session: WarehouseSession, cfg: config.FreshnessCheck, qualified: str, column: str, now: datetime,
    quote: Callable[[str], str] = quote_ident,
) -> FreshnessCheck:
    """``now - MAX(column)`` is at most ``threshold_seconds``; an empty table is not fresh."""
    threshold = cfg.threshold_seconds
    try:
        newest = scalar(session.query(f"SELECT MAX({quote(column)}) FROM {qualified}"))
    except AdapterError as exc:
        return FreshnessCheck(passed=False, severity=cfg.severity, threshold_seconds=threshold,
                              error=exc.message)
    moment = as_utc(newest)
    if moment is None:
        reason = "no rows" if newest is None else f"MAX({column}) = {newest!r} is not a timestamp"
        return FreshnessCheck(passed=False, severity=cfg.severity, threshold_seconds=threshold, error=reason)
    lag = int((as_utc(now) or now).timestamp() - moment.timestamp())
    return FreshnessCheck(
        passed=lag <= threshold, severity=cfg.severity, lag_seconds=lag, threshold_seconds=threshold
    )


def check_null_rate(
    session: WarehouseSession, cfg: config.NullRateCheck, qualified: str,
    quote: Callable[[str], str] = quote_ident,
) -> list[NullRateCheck]:
    """One check per column: the share of NULLs is at most ``threshold``.

    All columns are counted in one statement; when it fails (a missing column), each column is retried
    alone so the error lands on the column that caused it.
    """
    counts = ", ".join(f"COUNT({quote(c)})" for c in cfg.columns)
    try:
        rows = session.query(f"SELECT COUNT(*), {counts} FROM {qualified}")
        total, *present = (int(plain_number(v) or 0) for v in rows[0])
        return [_null_rate(cfg, c, total, p) for c, p in zip(cfg.columns, present, strict=True)]
    except AdapterError:
        pass
    checks = []
    for column in cfg.columns:
        try:
            row = session.query(f"SELECT COUNT(*), COUNT({quote(column)}) FROM {qualified}")[0]
        except AdapterError as exc:
            checks.append(NullRateCheck(
                passed=False, severity=cfg.severity, column=column, threshold=cfg.threshold, error=exc.message
            ))
            continue
        checks.append(_null_rate(cfg, column, int(row[0]), int(row[1])))
    return checks


def _null_rate(cfg: config.NullRateCheck, column: str, total: int, present: int) -> NullRateCheck:
    rate = 0.0 if total == 0 else (total - present) / total
    return NullRateCheck(
        passed=rate <= cfg.threshold, severity=cfg.severity, column=column, null_rate=round(rate, 6),
        threshold=cfg.threshold,
    )


def check_custom(session: WarehouseSession, cfg: config.CustomCheck, qualified: str) -> CustomCheck:
    """A user query (``{target}`` -> the table) whose single value must not exceed ``threshold``.

    A NULL result (an aggregate over no rows) counts as zero.
    """
    query = cfg.sql.replace("{target}", qualified)
    try:
        value = scalar(session.query(query))
    except AdapterError as exc:
        return CustomCheck(name=cfg.name, passed=False, severity=cfg.severity, query=query, error=exc.message)
    try:
        passed = float(value or 0) <= float(cfg.threshold)
    except (TypeError, ValueError):
        return CustomCheck(name=cfg.name, passed=False, severity=cfg.severity, query=query,
                           result_value=value, error=f"query returned {value!r}, not a number")
    return CustomCheck(name=cfg.name, passed=passed, severity=cfg.severity, query=query, result_value=value)
