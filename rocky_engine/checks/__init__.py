"""Quality checks and assertions: the built-in table checks, declarative assertions, anomaly detection.

``run_table_checks`` is the one entry point the runners call per table; ``check_records`` turns the
outcome into ``check_history`` rows (the anomaly baseline).
"""

from __future__ import annotations

from rocky_engine.checks.anomaly import MIN_HISTORY, detect_anomaly
from rocky_engine.checks.assertions import assertion_applies, assertion_sql, run_assertion, run_assertions
from rocky_engine.checks.history import all_records, check_records
from rocky_engine.checks.table_checks import CheckTarget, TableCheckOutcome, run_table_checks

__all__ = [
    "MIN_HISTORY",
    "CheckTarget",
    "TableCheckOutcome",
    "all_records",
    "assertion_applies",
    "assertion_sql",
    "check_records",
    "detect_anomaly",
    "run_assertion",
    "run_assertions",
    "run_table_checks",
]
