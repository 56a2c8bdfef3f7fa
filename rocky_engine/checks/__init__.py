"""Quality checks and assertions: the built-in table checks, declarative assertions, anomaly detection.

``run_table_checks`` is the one entry point the runners call per table; ``check_records`` turns the
outcome into ``check_history`` rows (the anomaly baseline).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

#: where each name of ``__all__`` lives (one import per name when first used)
_HOMES = {
    "MIN_HISTORY": "anomaly", "detect_anomaly": "anomaly",
    "assertion_applies": "assertions", "assertion_sql": "assertions", "run_assertion": "assertions",
    "run_assertions": "assertions",
    "all_records": "history", "check_records": "history",
    "CheckTarget": "table_checks", "TableCheckOutcome": "table_checks", "run_table_checks": "table_checks",
}


def __getattr__(name: str) -> object:
    """The package's names, loaded on first use (PEP 562).

    Every run imports ``checks.builtin`` (the row count of a materialization event), which runs this
    package first; without checks configured, the rest of it (anomaly detection, assertions, history) is
    start-up time of ``rocky run`` for nothing.
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
