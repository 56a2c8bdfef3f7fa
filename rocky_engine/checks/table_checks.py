"""Run a pipeline's ``[checks]`` against one table: the entry point replication, quality and snapshot share.

Order: row_count (its count also feeds anomaly detection), column_match (only with a source), freshness
(only with a timestamp column), null_rate, custom queries, then the assertions whose ``table`` names this
table. Nothing here raises for a warehouse error: every check is contained and reports its own ``error``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.dialect import Dialect
from rocky_engine.checks.anomaly import detect_anomaly
from rocky_engine.checks.assertions import assertion_applies, run_assertions
from rocky_engine.checks.builtin import (
    check_column_match,
    check_custom,
    check_freshness,
    check_null_rate,
    check_row_count,
    count_rows,
)
from rocky_engine.config.checks import ChecksConfig
from rocky_engine.errors import AdapterError
from rocky_engine.wire.checks import CheckResult, TableCheckResult
from rocky_engine.wire.run import AnomalyInfo


@dataclass
class CheckTarget:
    """The table to check and, for copies, where it came from."""

    #: the asset key reported in ``check_results[]``
    asset_key: list[str]
    #: ``catalog.schema.table`` of the checked table: the check-history key and the assertion match key
    table_key: str
    #: the quoted, qualified name of the checked table
    qualified: str
    #: the quoted, qualified name of the source (row_count comparison, column_match); None: no source
    source_qualified: str | None
    #: the session the source lives on; None: the source is read on the target's session
    source_session: WarehouseSession | None
    #: the column freshness reads; None: no freshness check
    timestamp_column: str | None
    #: target columns the pipeline adds itself (metadata columns), ignored by column_match
    ignore_columns: list[str] = field(default_factory=list)
    #: the target warehouse's dialect (identifiers, string literals, regex); ANSI by default (DuckDB,
    #: PostgreSQL)
    dialect: Dialect = field(default_factory=Dialect)


@dataclass
class TableCheckOutcome:
    """What checking one table produced."""

    result: TableCheckResult
    anomalies: list[AnomalyInfo] = field(default_factory=list)
    #: the table's row count when row_count ran and could count it (recorded as the anomaly baseline)
    row_count: int | None = None

    def error_failed(self) -> bool:
        """True when any error-severity check failed (the quality gate)."""
        return any(c.fails_gate for c in self.result.checks)

    def failed(self) -> list[CheckResult]:
        return [c for c in self.result.checks if not c.passed]

    def event_metadata(self) -> dict[str, Any]:
        """The ``metadata`` of the ``check_result`` hook event: the table, its verdict, its checks."""
        return {
            "asset_key": list(self.result.asset_key), "passed": not self.failed(),
            "checks": [c.wire() for c in self.result.checks],
        }


def run_table_checks(
    session: WarehouseSession,
    checks: ChecksConfig,
    target: CheckTarget,
    *,
    baseline: Callable[[str], list[int]] | None,
    now: datetime,
) -> TableCheckOutcome:
    """Run every configured check on ``target``.

    Args:
        session: the session the target table lives on.
        checks: the pipeline's ``[checks]``.
        target: the table (and source) to check.
        baseline: recent recorded row counts of a table key, newest first; None: no anomaly detection.
        now: the clock for freshness and time-based assertions.
    """
    result = TableCheckResult(asset_key=list(target.asset_key))
    outcome = TableCheckOutcome(result=result)
    if not checks.enabled:
        return outcome
    out = result.checks
    source_session = target.source_session or session
    source = (source_session, target.source_qualified) if target.source_qualified else None
    if checks.row_count:
        try:
            outcome.row_count = count_rows(session, target.qualified)
            count_error = None
        except AdapterError as exc:
            count_error = exc.message
        out.append(check_row_count(outcome.row_count, count_error, source))
        if outcome.row_count is not None and baseline is not None:
            anomaly = detect_anomaly(
                target.table_key, outcome.row_count, baseline(target.table_key),
                float(checks.anomaly_threshold_pct),
            )
            if anomaly is not None:
                outcome.anomalies.append(anomaly)
    if checks.column_match.enabled and source is not None:
        own = (session, target.qualified)
        out.append(check_column_match(checks.column_match, own, source, target.ignore_columns))
    if checks.freshness is not None and target.timestamp_column:
        out.append(check_freshness(session, checks.freshness, target.qualified, target.timestamp_column, now,
                                   target.dialect.quote))
    if checks.null_rate is not None:
        out.extend(check_null_rate(session, checks.null_rate, target.qualified, target.dialect.quote))
    for custom in checks.custom:
        out.append(check_custom(session, custom, target.qualified))
    parts = target.table_key.split(".")
    mine = [a for a in checks.assertions if assertion_applies(a.table, parts)]
    if mine:
        out.extend(run_assertions(session, mine, target.qualified, now, target.dialect))
    return outcome
