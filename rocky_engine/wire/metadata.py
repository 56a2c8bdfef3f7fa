"""What a materialization and a check result tell Dagster: one builder for both sides.

``dagster_rocky`` (``execution.py``, reading the run document) and the engine's Pipes reporter
(``run/pipes_report.py``, reporting from inside ``rocky run``) both call these, so an asset shows the same
metadata whichever way it was materialized. Pure functions over the wire models: no Dagster import.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rocky_engine.wire.checks import CheckResult, RowCountCheck, TableCheckResult
from rocky_engine.wire.run import MaterializationInfo

#: the rows this run wrote; ``dagster/row_count`` is the table's row count after the run
ROWS_COPIED = "rocky/rows_copied"


def materialization_metadata(
    mat: MaterializationInfo, run_id: str | None = None, row_count: int | None = None
) -> dict[str, Any]:
    """The metadata of one materialization (Dagster's own ``dagster/*`` keys included); empty facts are
    left out. ``dagster/row_count`` is ``row_count``, the target's rows after the run, only when it was
    counted: the rows copied (0 after a no-op incremental run) are ``rocky/rows_copied``."""
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
        "rocky/run_id": run_id,
    }
    return {k: v for k, v in meta.items() if v not in ("", None)}


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
