"""Row-count anomaly detection: a table's count against the average of its recent recorded counts.

The history is the ``row_count`` values of ``check_history`` (``store.checks.row_count_baseline``). With
fewer than ``MIN_HISTORY`` points there is no baseline worth trusting, so nothing is flagged. Anomalies are
advisory: they are logged, reported in ``anomalies[]`` and fire ``anomaly_detected``; they never fail a run.
"""

from __future__ import annotations

from collections.abc import Sequence

from rocky_engine.logs import get_logger
from rocky_engine.wire.run import AnomalyInfo

#: history points needed before a deviation means anything
MIN_HISTORY = 3
#: newest recorded counts averaged into the baseline
HISTORY_WINDOW = 10

log = get_logger("checks")


def detect_anomaly(
    table: str, current_count: int, history: Sequence[int], threshold_pct: float
) -> AnomalyInfo | None:
    """An :class:`AnomalyInfo` when ``current_count`` deviates from the history average by more than
    ``threshold_pct`` percent; ``None`` otherwise (or with too little history).

    An average of zero is compared as if it were one row, so a table that was empty and now has rows is
    flagged (deviation ``current_count * 100`` percent) without dividing by zero.
    """
    window = list(history)[:HISTORY_WINDOW]
    if len(window) < MIN_HISTORY:
        return None
    baseline_avg = sum(window) / len(window)
    deviation_pct = abs(current_count - baseline_avg) / max(baseline_avg, 1.0) * 100.0
    if deviation_pct <= threshold_pct:
        return None
    direction = "dropped" if current_count < baseline_avg else "grew"
    reason = (
        f"row count {direction} to {current_count} from a baseline average of {baseline_avg:.1f} over "
        f"{len(window)} runs ({deviation_pct:.1f}% > {threshold_pct:g}% threshold)"
    )
    log.warning("row count anomaly detected on %s: %s", table, reason)
    return AnomalyInfo(
        table=table,
        current_count=current_count,
        baseline_avg=round(baseline_avg, 3),
        deviation_pct=round(deviation_pct, 2),
        reason=reason,
    )
