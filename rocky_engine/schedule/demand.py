"""Demand evaluation: is a pipeline's cron, after or freshness source due at ``now``?

Pure functions over instants (UTC datetimes) and the facts read from the state store; no I/O.

Cron expressions are evaluated in the pipeline's wall-clock time zone with croniter over *naive* local
times, and each local occurrence is then mapped to one instant. That mapping is where daylight saving time
is decided, and it is what "a skipped hour fires once, a repeated hour once" means:

- a local time that does not exist (the hour skipped in spring) maps to the transition instant, the first
  instant after the gap; every occurrence inside the gap collapses onto it, so the gap fires once;
- a local time that exists twice (the hour repeated in autumn) maps to its first instant only, so the
  repeated hour fires once and its second pass fires nothing.

The mapping never decreases, so "occurrences in (anchor, now]" is a forward walk that stops at ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo

#: An occurrence first seen later than this after its time is "missed" (matters for catchup = "skip").
CATCHUP_GRACE = timedelta(minutes=5)
#: Counting missed occurrences stops here (an every-minute cron after a year offline); see ``missed``.
MISSED_CAP = 1000

CronReason = Literal["due", "not_due", "catchup_skipped"]


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def to_wall(instant: datetime, tz: ZoneInfo) -> datetime:
    """The naive local wall-clock time of ``instant`` in ``tz``."""
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def to_instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """The one UTC instant a local wall time fires at (first pass when repeated, transition when skipped)."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if to_wall(first, tz) == wall:
        return first
    # ``wall`` falls in a gap. zoneinfo places it with the pre-gap offset (``first`` lands after the gap)
    # and with fold=1 with the post-gap offset (before the gap); the transition lies between the two.
    other = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    lo, hi = min(first, other), max(first, other)
    while (hi - lo) > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid <= lo:
            break
        if to_wall(mid, tz) >= wall:
            hi = mid
        else:
            lo = mid
    return hi


def _croniter(expr: str, start_wall: datetime):  # type: ignore[no-untyped-def]
    from croniter import croniter  # imported only when cron arithmetic is needed (not on a quiet tick)

    return croniter(expr, start_wall)


@dataclass(frozen=True)
class Occurrences:
    """Cron occurrences in ``(after, until]``."""

    newest: datetime | None
    count: int
    #: True when counting stopped at MISSED_CAP (``count`` is then a lower bound)
    capped: bool = False


def occurrences_between(expr: str, tz_name: str, after: datetime, until: datetime) -> Occurrences:
    """The occurrences of ``expr`` (in ``tz_name``) strictly after ``after`` and at or before ``until``."""
    tz = zone(tz_name)
    if until <= after:
        return Occurrences(None, 0)
    it = _croniter(expr, to_wall(after, tz))
    newest: datetime | None = None
    count = 0
    while True:
        instant = to_instant(it.get_next(datetime), tz)
        if instant <= after or instant == newest:
            continue  # the second pass of a repeated hour, or a gap collapsing onto one instant
        if instant > until:
            return Occurrences(newest, count)
        newest = instant
        count += 1
        if count >= MISSED_CAP:
            break
    # Too many to walk: the newest is the occurrence just before ``until`` (walking back from it).
    assert newest is not None
    back = _croniter(expr, to_wall(until, tz) + timedelta(seconds=1))
    while True:
        instant = to_instant(back.get_prev(datetime), tz)
        if instant <= until:
            return Occurrences(max(instant, newest), count, capped=True)


def next_occurrence(expr: str, tz_name: str, after: datetime) -> datetime:
    """The first occurrence strictly after ``after``."""
    tz = zone(tz_name)
    it = _croniter(expr, to_wall(after, tz))
    while True:
        instant = to_instant(it.get_next(datetime), tz)
        if instant > after:
            return instant


def shortest_interval(expr: str, tz_name: str = "UTC", samples: int = 64) -> timedelta:
    """The smallest gap between consecutive occurrences over the next ``samples`` (dead-timer check)."""
    it = _croniter(expr, datetime(2026, 1, 5))
    previous = it.get_next(datetime)
    best: timedelta | None = None
    for _ in range(samples):
        current = it.get_next(datetime)
        gap = current - previous
        best = gap if best is None else min(best, gap)
        previous = current
    assert best is not None
    return best


# ---------------------------------------------------------------------- cron


@dataclass(frozen=True)
class CronEvaluation:
    """What the cron source says at ``now`` and where its anchor moves."""

    reason: CronReason
    #: the occurrence that fires (due) or the newest one accounted for (catchup_skipped)
    logical_ts: datetime | None = None
    #: occurrences passed over without firing (omitted when 0)
    missed: int = 0
    #: the anchor to store: at submission for ``due``, now for ``catchup_skipped``; None: unchanged
    new_anchor: datetime | None = None
    #: the projection to store with that anchor
    next_fire_at: datetime | None = None
    first_sight: bool = False


def evaluate_cron(
    expr: str,
    tz_name: str,
    catchup: str,
    anchor: datetime | None,
    now: datetime,
    *,
    next_fire_at: datetime | None = None,
) -> CronEvaluation:
    """Evaluate one cron source.

    First sight (no anchor) records ``now`` as the anchor and does not fire. Afterwards the newest
    occurrence in ``(anchor, now]`` fires under ``catchup = "latest"``; under ``"skip"`` it fires only when
    it is at most CATCHUP_GRACE old, and otherwise the anchor moves past it and nothing fires.
    ``next_fire_at`` (the stored projection for this anchor) lets a quiet tick answer without croniter.
    """
    if anchor is None:
        return CronEvaluation(
            "not_due", new_anchor=now, next_fire_at=next_occurrence(expr, tz_name, now), first_sight=True
        )
    if next_fire_at is not None and next_fire_at > now:
        return CronEvaluation("not_due")
    occ = occurrences_between(expr, tz_name, anchor, now)
    if occ.newest is None:
        return CronEvaluation("not_due", next_fire_at=next_occurrence(expr, tz_name, anchor))
    following = next_occurrence(expr, tz_name, occ.newest)
    if catchup == "skip" and now - occ.newest > CATCHUP_GRACE:
        return CronEvaluation(
            "catchup_skipped",
            logical_ts=occ.newest,
            missed=occ.count,
            new_anchor=occ.newest,
            next_fire_at=following,
        )
    return CronEvaluation(
        "due", logical_ts=occ.newest, missed=occ.count - 1, new_anchor=occ.newest, next_fire_at=following
    )


# ---------------------------------------------------------------------- after and freshness


@dataclass(frozen=True)
class AfterEvaluation:
    due: bool
    #: the newest upstream success finish (the event the downstream run answers); None when not due
    logical_ts: datetime | None = None
    #: upstreams still waiting for a newer success (for messages)
    waiting_on: tuple[str, ...] = ()


def evaluate_after(
    own_last_success_start: datetime | None, upstream_success_finish: dict[str, datetime | None]
) -> AfterEvaluation:
    """Due once every upstream has a Success that finished after this pipeline's latest success started.

    A pipeline that never succeeded is due once every upstream has succeeded at all.
    """
    waiting: list[str] = []
    newest: datetime | None = None
    for name, finished in upstream_success_finish.items():
        if finished is None or (own_last_success_start is not None and finished <= own_last_success_start):
            waiting.append(name)
        elif newest is None or finished > newest:
            newest = finished
    if waiting or newest is None:
        return AfterEvaluation(False, waiting_on=tuple(waiting))
    return AfterEvaluation(True, logical_ts=newest)


@dataclass(frozen=True)
class FreshnessEvaluation:
    due: bool
    #: seconds since the latest success finished (None: never succeeded)
    lag_seconds: float | None = None


def evaluate_freshness(
    last_success_finish: datetime | None, budget_seconds: int, now: datetime
) -> FreshnessEvaluation:
    """Due when the latest success is older than the budget; never succeeded reads as exceeded."""
    if last_success_finish is None:
        return FreshnessEvaluation(True)
    lag = (now - last_success_finish).total_seconds()
    return FreshnessEvaluation(lag > budget_seconds, lag)
