"""What a materialization and a check result tell Dagster: one builder for both sides.

``dagster_rocky`` (``execution.py``, reading the run document) and the engine's Pipes reporter
(``run/pipes_report.py``, reporting from inside ``rocky run``) both call these, so an asset shows the same
metadata whichever way it was materialized. Pure functions over the wire models: no Dagster import.
"""

from __future__ import annotations

from typing import Any

from rocky_engine.wire.checks import CheckResult
from rocky_engine.wire.run import MaterializationInfo


def materialization_metadata(mat: MaterializationInfo, run_id: str | None = None) -> dict[str, Any]:
    """The metadata of one materialization (Dagster's own ``dagster/*`` keys included); empty facts are
    left out."""
    meta: dict[str, Any] = {
        "dagster/duration_ms": mat.duration_ms,
        "duration_ms": mat.duration_ms,
        "strategy": mat.metadata.strategy,
        "target_table_full_name": mat.metadata.target_table_full_name,
        "dagster/table_name": mat.metadata.target_table_full_name,
        "dagster/row_count": mat.rows_copied,
        "rows_copied": mat.rows_copied,
        "watermark": mat.metadata.watermark,
        "sql_hash": mat.metadata.sql_hash,
        "column_count": mat.metadata.column_count,
        "started_at": mat.started_at,
        "rocky/run_id": run_id,
    }
    return {k: v for k, v in meta.items() if v not in ("", None)}


def check_metadata(check: CheckResult) -> dict[str, Any]:
    """The measured details of one check (counts, lag, failing rows, the error ...), without nulls."""
    return {k: v for k, v in check.details.items() if v is not None}


def dagster_severity(check: CheckResult) -> str:
    """``WARN`` or ``ERROR``: the Dagster severity of a check (anything but a warning is an error)."""
    return "WARN" if check.severity.lower().startswith("warn") else "ERROR"
