"""One pipeline's decision at one tick: which declared source is due, and why the others are not.

Order of precedence: paused, config error (fail closed: a schedule that cannot be resolved never fires),
disabled, a claim still in flight; then the sources in priority cron > after > freshness. The first due
source wins and later due sources report ``superseded``. Backoff holds back after and freshness only.

The decision is computed without writing anything; the reconciler applies ``row`` (first-sight anchor,
skipped catch-up, refreshed projection) and, when it launches the winner, ``cron_fire``. A dry run uses the
same function and discards both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from rocky_engine.errors import StateError
from rocky_engine.schedule.backoff import active_backoff
from rocky_engine.schedule.demand import (
    CronEvaluation,
    evaluate_after,
    evaluate_cron,
    evaluate_freshness,
)
from rocky_engine.schedule.plan import PipelinePlan, resolve_schedule
from rocky_engine.state._time import rfc3339
from rocky_engine.state.schedule import ScheduleRow, SuccessWindow
from rocky_engine.wire.tick import Reason, SourceEntry


class History(Protocol):
    """The one read the decision needs from the run history."""

    def latest_success(self, pipeline: str) -> SuccessWindow | None: ...


@dataclass
class Decision:
    """What the tick does with one pipeline's declared demand."""

    sources: list[SourceEntry] = field(default_factory=list)
    #: the winning source (cron | after | freshness) and its logical time
    winner: str | None = None
    logical_ts: datetime | None = None
    #: the cursor after evaluation (before any launch)
    row: ScheduleRow | None = None
    row_changed: bool = False
    #: anchor and projection to store when the cron winner is submitted
    cron_fire: CronEvaluation | None = None

    def entry(self, source: str) -> SourceEntry | None:
        return next((s for s in self.sources if s.source == source), None)


def _all(sources: list[str], reason: Reason, detail: str | None = None) -> list[SourceEntry]:
    return [SourceEntry(source=s, reason=reason, detail=detail) for s in sources]


def decide(
    pp: PipelinePlan,
    row: ScheduleRow,
    *,
    now: datetime,
    in_flight: bool,
    history: History,
    budget: Callable[[PipelinePlan], int | None],
) -> Decision:
    """Evaluate ``pp``'s declared demand at ``now`` against its cursor ``row``."""
    declared = pp.declared_sources or ["schedule"]
    d = Decision(row=row)
    if not pp.scheduled:
        return d  # only webhook demand, handled by the reconciler
    if row.paused:
        d.sources = _all(declared, "paused")
        return d
    cron_changed = bool(pp.cron) and (row.cron != pp.cron or row.timezone != pp.timezone)
    # An anchored expression was valid when it was anchored: only a new or changed one is parsed here.
    resolution = resolve_schedule(pp, budget, check_cron=cron_changed or row.cron_anchor is None)
    if resolution.config_error is not None:
        d.sources = _all(declared, "config_error", resolution.config_error)
        return d
    freshness_budget = resolution.freshness_budget
    if not pp.enabled:
        d.sources = _all(declared, "disabled")
        return d
    if in_flight:
        d.sources = _all(declared, "in_flight")
        return d

    candidates: list[tuple[str, datetime]] = []
    if pp.cron:
        _cron(pp, row, now, cron_changed, d, candidates)
    own: SuccessWindow | None = None
    history_error: str | None = None
    if pp.after or pp.freshness:
        try:
            own = history.latest_success(pp.name)
        except StateError as exc:
            history_error = str(exc)
    if pp.after:
        _after(pp, own, history_error, history, d, candidates)
    if pp.freshness:
        if history_error is not None:
            d.sources.append(
                SourceEntry(source="freshness", reason="history_unavailable", detail=history_error)
            )
        else:
            assert freshness_budget is not None
            fe = evaluate_freshness(own.finished_at if own else None, freshness_budget, now)
            if fe.due:
                candidates.append(("freshness", now))
                d.sources.append(SourceEntry(source="freshness", reason="due"))
            else:
                d.sources.append(SourceEntry(source="freshness", reason="not_due"))
    _choose(d, candidates, row, now)
    return d


def _cron(
    pp: PipelinePlan,
    row: ScheduleRow,
    now: datetime,
    changed: bool,
    d: Decision,
    candidates: list[tuple[str, datetime]],
) -> None:
    assert pp.cron is not None and d.row is not None
    anchor = None if changed else row.cron_anchor
    ev = evaluate_cron(
        pp.cron, pp.timezone, pp.catchup, anchor, now, next_fire_at=None if changed else row.next_fire_at
    )
    if ev.first_sight:
        d.row = d.row.with_(
            cron=pp.cron, timezone=pp.timezone, cron_anchor=ev.new_anchor, next_fire_at=ev.next_fire_at
        )
        d.row_changed = True
        d.sources.append(SourceEntry(source="cron", reason="not_due", detail="first sight: anchored"))
    elif ev.reason == "catchup_skipped":
        d.row = d.row.with_(cron_anchor=ev.new_anchor, next_fire_at=ev.next_fire_at)
        d.row_changed = True
        d.sources.append(SourceEntry(source="cron", reason="catchup_skipped", missed=ev.missed))
    elif ev.reason == "due":
        assert ev.logical_ts is not None
        d.cron_fire = ev
        candidates.append(("cron", ev.logical_ts))
        d.sources.append(SourceEntry(source="cron", reason="due", missed=ev.missed or None))
    else:
        if ev.next_fire_at is not None and ev.next_fire_at != row.next_fire_at:
            d.row = d.row.with_(next_fire_at=ev.next_fire_at)
            d.row_changed = True
        d.sources.append(SourceEntry(source="cron", reason="not_due"))


def _after(
    pp: PipelinePlan,
    own: SuccessWindow | None,
    history_error: str | None,
    history: History,
    d: Decision,
    candidates: list[tuple[str, datetime]],
) -> None:
    if history_error is None:
        try:
            upstream = {}
            for name in pp.after:
                window = history.latest_success(name)
                upstream[name] = window.finished_at if window else None
        except StateError as exc:
            history_error = str(exc)
    if history_error is not None:
        d.sources.append(SourceEntry(source="after", reason="history_unavailable", detail=history_error))
        return
    ae = evaluate_after(own.started_at if own else None, upstream)
    if ae.due:
        assert ae.logical_ts is not None
        candidates.append(("after", ae.logical_ts))
        d.sources.append(SourceEntry(source="after", reason="due"))
    else:
        d.sources.append(
            SourceEntry(source="after", reason="not_due", detail=f"waiting on {', '.join(ae.waiting_on)}")
        )


def _choose(d: Decision, candidates: list[tuple[str, datetime]], row: ScheduleRow, now: datetime) -> None:
    """Cron wins outright; after/freshness win only outside a backoff; later due sources are superseded."""
    for source, logical in candidates:
        entry = d.entry(source)
        assert entry is not None
        if d.winner is not None:
            entry.reason = "superseded"
            entry.missed = None
            continue
        if source != "cron":
            backoff = active_backoff(row.last_outcome, row.consecutive_failures, row.last_attempt_at, now)
            if backoff is not None:
                entry.reason = backoff.reason
                entry.resume_at = rfc3339(backoff.resume_at)
                continue
        d.winner, d.logical_ts = source, logical
