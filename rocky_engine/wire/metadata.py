"""What a materialization and a check result tell Dagster: one builder for both sides.

``dagster_rocky`` (``execution.py``, reading the run document) and the engine's Pipes reporter
(``run/pipes_report.py``, reporting from inside ``rocky run``) both call these, so an asset shows the same
metadata whichever way it was materialized. Pure functions over the wire models: no Dagster import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from rocky_engine.wire.checks import CheckResult, RowCountCheck, TableCheckResult
from rocky_engine.wire.events import EventAnomaly, EventDrift
from rocky_engine.wire.run import MaterializationInfo

#: the rows this run wrote; ``dagster/row_count`` is the table's row count after the run
ROWS_COPIED = "rocky/rows_copied"
#: the schema-drift actions the run took on the asset, on its materialization
DRIFT = "rocky/drift"
#: when the engine finished the asset (epoch seconds; a Dagster timestamp), next to when Dagster recorded it
FINISHED_AT = "rocky/finished_at"
#: the name of the anomaly detector's check (the engine's kind ``anomaly``)
ANOMALY_CHECK = "row_count_anomaly"

_INVALID_NAME = re.compile(r"[^A-Za-z0-9_]")


def dagster_check_name(name: str, kind: str | None = None) -> str:
    """The Dagster check name of the engine's check ``name`` of ``kind``: Dagster names must match
    ``^[A-Za-z0-9_]+$``, so every other character becomes ``_`` (``not_null:id`` is ``not_null_id``).
    Here, because the engine's Pipes reporter and ``dagster_rocky``'s specs must agree on it."""
    if kind == "anomaly":
        return ANOMALY_CHECK
    return _INVALID_NAME.sub("_", name) or "check"


def materialization_metadata(
    mat: MaterializationInfo, run_id: str | None = None, row_count: int | None = None, *,
    pipeline: str | None = None, finished_at: datetime | None = None,
) -> dict[str, Any]:
    """The metadata of one materialization (Dagster's own ``dagster/*`` keys included); empty facts are
    left out. ``dagster/row_count`` is ``row_count``, the target's rows after the run, only when it was
    counted: the rows copied (0 after a no-op incremental run) are ``rocky/rows_copied``.
    ``rocky/finished_at`` is ``finished_at`` (an event's time), else ``started_at`` plus the duration."""
    meta: dict[str, Any] = {
        "dagster/duration_ms": mat.duration_ms,
        "duration_ms": mat.duration_ms,
        "strategy": mat.metadata.strategy,
        "target_table_full_name": mat.metadata.target_table_full_name,
        "dagster/table_name": mat.metadata.target_table_full_name,
        "dagster/row_count": row_count,
        ROWS_COPIED: mat.rows_copied,
        "rows_copied": mat.rows_copied,
        "watermark": mat.metadata.watermark,
        "sql_hash": mat.metadata.sql_hash,
        "column_count": mat.metadata.column_count,
        "started_at": mat.started_at,
        FINISHED_AT: _finished_at(mat, finished_at),
        "rocky/run_id": run_id,
        "rocky/pipeline": pipeline,
    }
    return {k: v for k, v in meta.items() if v not in ("", None)}


def _finished_at(mat: MaterializationInfo, finished_at: datetime | None) -> float | None:
    if finished_at is not None:
        return finished_at.timestamp()
    if not mat.started_at:
        return None
    try:
        started = datetime.fromisoformat(mat.started_at)
    except ValueError:
        return None
    return (started + timedelta(milliseconds=mat.duration_ms)).timestamp()


def row_counts_after_run(check_results: Iterable[TableCheckResult]) -> dict[tuple[str, ...], int]:
    """Asset key path -> the target's row count a ``row_count`` check measured after the run (what the
    run document knows of ``dagster/row_count``)."""
    counts: dict[tuple[str, ...], int] = {}
    for table in check_results:
        for check in table.checks:
            if isinstance(check, RowCountCheck) and check.target_count is not None:
                counts[tuple(table.asset_key)] = check.target_count
    return counts


def check_metadata(check: CheckResult) -> dict[str, Any]:
    """The measured details of one check (counts, lag, failing rows, the error ...), without nulls."""
    return {k: v for k, v in check.details.items() if v is not None}


def dagster_severity(check: CheckResult) -> str:
    """``WARN`` or ``ERROR``: the Dagster severity of a check (anything but a warning is an error)."""
    return "WARN" if check.severity.lower().startswith("warn") else "ERROR"


def drift_entry(drift: EventDrift) -> dict[str, Any]:
    """One drift action as an item of a materialization's ``rocky/drift``."""
    return {"action": drift.action, "reason": drift.reason, "columns": list(drift.columns)}


def anomaly_metadata(anomaly: EventAnomaly) -> dict[str, Any]:
    """An anomaly's counts: the metadata of its observation and of its ``row_count_anomaly`` result."""
    return {
        "current_count": anomaly.current_count,
        "baseline_avg": anomaly.baseline_avg,
        "deviation_pct": anomaly.deviation_pct,
        "reason": anomaly.reason,
    }
