"""The retry trail of one table or model (``materializations[].attempts``, ``models_executed[].attempts``).

A statement the adapter retried (``[adapter.*.retry]``) and a whole table the run attempted again
(``[execution] table_retries``) are both tries of that table: a run that succeeded only on its second try
says so in its document and its record, not only in a log line. A first-try success has no trail.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.retry import RetriedAttempt, RetryingSession
from rocky_engine.wire.run import AttemptInfo

#: a failed try's message is cut here (the table's own error, if it failed, is reported in full)
_ERROR_CHARS = 300


def take_retried(sessions: Iterable[WarehouseSession]) -> list[RetriedAttempt]:
    """The statement tries ``sessions`` retried since they were last asked (and forget them)."""
    taken: list[RetriedAttempt] = []
    for session in sessions:
        if isinstance(session, RetryingSession):
            taken.extend(session.take_retried())
    return taken


def attempt_trail(
    retried: Sequence[RetriedAttempt], total_ms: int, final_error: str | None = None
) -> list[AttemptInfo]:
    """Every try in order, the last one being the outcome that stuck (``final_error`` when it failed);
    empty when nothing was retried. The last try's duration is what the retried ones leave of
    ``total_ms``."""
    if not retried:
        return []
    trail: list[AttemptInfo] = []
    spent = 0
    for n, tried in enumerate(sorted(retried, key=lambda r: r.started), start=1):
        trail.append(AttemptInfo(
            attempt=n, duration_ms=tried.duration_ms, outcome="failed", error=tried.error[:_ERROR_CHARS],
            failure_class="unknown" if tried.failure_kind == "unknown" else "transient",
            transient_kind=tried.failure_kind, backoff_ms=tried.backoff_ms,
        ))
        spent += tried.duration_ms + tried.backoff_ms
    trail.append(AttemptInfo(
        attempt=len(trail) + 1, duration_ms=max(0, total_ms - spent),
        outcome="failed" if final_error is not None else "success",
        error=final_error[:_ERROR_CHARS] if final_error is not None else None,
    ))
    return trail
