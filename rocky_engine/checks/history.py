"""Turn check outcomes into ``check_history`` records (one per check, written by the run in one batch).

Each record's ``value`` is the number its check kind is summarised by (``CheckResult.number()``: the
target count, the lag, the null rate, a numeric custom result, the failing rows). The ``row_count`` check's
value is the table's row count: the anomaly baseline of later runs, which reads every non-NULL value
recorded under the name ``row_count``, so a custom check or an assertion a user named ``row_count`` keeps
its number in the detail only.
"""

from __future__ import annotations

from collections.abc import Iterable

from rocky_engine.checks.table_checks import TableCheckOutcome
from rocky_engine.state.check_history import ROW_COUNT, CheckRecord
from rocky_engine.wire.checks import CheckResult, RowCountCheck


def check_value(check: CheckResult) -> float | int | None:
    """The ``check_history.value`` of one check."""
    if check.name == ROW_COUNT and not isinstance(check, RowCountCheck):
        return None
    return check.number()


def check_records(run_id: str, table_key: str, outcome: TableCheckOutcome) -> list[CheckRecord]:
    """The records of one table's checks; the row_count record carries the count for the baseline."""
    return [
        CheckRecord(
            run_id=run_id,
            table_key=table_key,
            check_name=check.name,
            passed=check.passed,
            value=check_value(check),
            severity=check.severity or None,
            detail=check.details,
        )
        for check in outcome.result.checks
    ]


def all_records(run_id: str, outcomes: Iterable[tuple[str, TableCheckOutcome]]) -> list[CheckRecord]:
    """Records of several tables: ``(table_key, outcome)`` pairs."""
    return [r for key, outcome in outcomes for r in check_records(run_id, key, outcome)]
