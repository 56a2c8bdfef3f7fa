"""Turn check outcomes into ``check_history`` records (one per check, written by the run in one batch).

The ``row_count`` record's ``value`` is the table's row count: the anomaly baseline of later runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rocky_engine.checks.table_checks import TableCheckOutcome
from rocky_engine.state.check_history import ROW_COUNT, CheckRecord

#: the detail key whose number becomes ``check_history.value``, per check name or assertion kind
_VALUE_KEYS = ("target_count", "lag_seconds", "null_rate", "result_value", "failing_rows")
_RESERVED = frozenset({"name", "passed", "severity"})


def check_value(check: dict[str, Any]) -> float | int | None:
    """The number a check is best summarised by (row count, lag, null rate, result, failing rows)."""
    for key in _VALUE_KEYS:
        value = check.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    return None


def check_records(run_id: str, table_key: str, outcome: TableCheckOutcome) -> list[CheckRecord]:
    """The records of one table's checks; the row_count record carries the count for the baseline."""
    records = []
    for check in outcome.result.checks:
        name = str(check.get("name"))
        if name != ROW_COUNT:
            value = check_value(check)
        elif "kind" not in check:
            value = outcome.row_count
        else:
            # An assertion a user named "row_count" must not feed the row-count baseline (which reads
            # every non-NULL row_count value), so its number stays in the detail only.
            value = None
        records.append(
            CheckRecord(
                run_id=run_id,
                table_key=table_key,
                check_name=name,
                passed=bool(check.get("passed")),
                value=value,
                severity=str(check.get("severity")) if check.get("severity") else None,
                detail={k: v for k, v in check.items() if k not in _RESERVED},
            )
        )
    return records


def all_records(run_id: str, outcomes: Iterable[tuple[str, TableCheckOutcome]]) -> list[CheckRecord]:
    """Records of several tables: ``(table_key, outcome)`` pairs."""
    return [r for key, outcome in outcomes for r in check_records(run_id, key, outcome)]
