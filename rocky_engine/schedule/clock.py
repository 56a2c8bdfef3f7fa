"""The evaluation instant of a live tick may not run ahead of the wall clock.

A live tick stores what it decided at its instant: cron anchors and next fires, ``last_fire``, the time
of the last attempt (the base of a backoff) and ``last_evaluated_at``. Evaluated at a future ``--now``,
those are all dated ahead, and the next real ticks find every cron occurrence up to that instant already
accounted for: cron stops firing, backoffs last longer, and ``doctor`` reads a timer that looks alive.
So a live tick refuses an instant later than the wall clock by more than :data:`FUTURE_SKEW_SECONDS`
(``--dry-run`` writes nothing and may preview any instant), and ``doctor --check scheduler`` warns about
a stored ``last_evaluated_at`` in the future (written before this rule, or by a clock that went back).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rocky_engine.errors import UsageError
from rocky_engine.state._time import rfc3339, utc

#: how far ahead of the wall clock an instant may be and still count as "now" (a --now taken from
#: another, NTP-synced host; a script rounding up to the next second)
FUTURE_SKEW_SECONDS = 5.0
FUTURE_SKEW = timedelta(seconds=FUTURE_SKEW_SECONDS)


def ahead_of(moment: datetime, wall: datetime) -> timedelta | None:
    """How far ``moment`` is later than ``wall`` beyond the skew, else None."""
    ahead = utc(moment) - utc(wall)
    return ahead if ahead > FUTURE_SKEW else None


def refuse_future_now(now: datetime, wall_seconds: float) -> None:
    """Raise for a live tick whose instant ``now`` is later than the wall clock (beyond the skew).

    Raises:
        UsageError: ``now`` is ahead of the wall clock (exit 1, as any bad ``--now``).
    """
    wall = datetime.fromtimestamp(wall_seconds, UTC)
    ahead = ahead_of(now, wall)
    if ahead is None:
        return
    raise UsageError(
        f"--now {rfc3339(now)} is {_span(ahead)} later than the wall clock ({rfc3339(wall)}): a real tick "
        "would store cron anchors, backoffs and last_evaluated_at in the future, and cron would not fire "
        "again until then",
        hint="preview a future instant with `rocky tick --dry-run --now ...`; a real tick runs at the wall "
        "clock (omit --now)",
    )


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"
