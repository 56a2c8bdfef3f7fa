"""``rocky brief``: a digest of the estate since a moment, for a person or a failure hook to post.

Sections (CONTRACT section 8), each with ``availability`` = ``available`` | ``no_data`` | ``unavailable``:

- ``runs``: counts by outcome (partial failures apart from total failures) and the failed runs with their
  failed models or tables;
- ``drift``: schema drift recorded by the runs of the window;
- ``freshness``: per pipeline, the age of the latest success against its budget (the smallest model
  ``max_lag_seconds``, else ``[freshness] expected_lag_seconds`` for a ``freshness = true`` schedule);
- ``quality``: checks recorded in the window and the ones that failed;
- ``scheduler``: from the scheduler (paused pipelines, failure streaks, incidents) when it is built in,
  else ``no_data``.

``--since last`` starts where the previous ``--since last`` brief ended. The cursor lives in the state
store's metadata table (``brief_cursor``) and advances only after the brief was written out in full
(``BriefResult.after_emit``), so a brief that failed to render or deliver is repeated, not lost.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import PrivateAttr

from rocky_engine.errors import StateError, StateLockedError, UsageError
from rocky_engine.logs import get_logger
from rocky_engine.ops.brief_md import render_brief_md
from rocky_engine.output import Result
from rocky_engine.project import Project
from rocky_engine.state._time import from_db, rfc3339, to_db
from rocky_engine.state.runs import RunRecord
from rocky_engine.state.store import StateStore
from rocky_engine.wire.base import WireModel
from rocky_engine.wire.brief import (
    SINCE_MODES,
    AttentionModel,
    AttentionRun,
    BriefResult,
    CostSection,
    DriftEvent,
    DriftSection,
    FreshnessItem,
    FreshnessSection,
    PipelineRuns,
    QualityFailure,
    QualitySection,
    RunCost,
    RunFailure,
    RunsSection,
    SchedulerSection,
)
from rocky_engine.wire.run import DriftInfo, TableError

log = get_logger("brief")
_Recorded = TypeVar("_Recorded", bound=WireModel)

CURSOR_KEY = "brief_cursor"
DEFAULT_WINDOW = timedelta(hours=24)
_LISTED = 20
_SPAN = re.compile(r"^(\d+)\s*([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


class BriefOutput(BriefResult, Result):
    """``rocky brief``: the digest, rendered as Markdown (also for ``--output table``)."""

    _after: Callable[[], None] | None = PrivateAttr(default=None)

    def render_md(self) -> str:
        return render_brief_md(self)

    def render_table(self) -> str:
        return render_brief_md(self)

    def after_emit(self) -> None:
        """Called once the document was written out: advances the ``--since last`` cursor."""
        if self._after is not None:
            self._after()


def parse_since(spec: str | None, *, now: datetime, cursor: str | None) -> tuple[datetime, str]:
    """The start of the window and its label.

    Raises:
        UsageError: ``spec`` is not ``last``, ``<N>m``/``<N>h``/``<N>d`` or an ISO date / RFC 3339 time.
    """
    spec = (spec or "24h").strip()
    if spec == "last":
        if cursor:
            return from_db(cursor), "last"
        return now - DEFAULT_WINDOW, "last"
    match = _SPAN.match(spec)
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))}), spec
    try:
        moment = datetime.fromisoformat(spec.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since '{spec}' is not understood",
            hint="use last, a span like 24h / 7d / 90m, or a date (2026-05-01) / RFC 3339 time",
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)), spec


def build_brief(
    project: Project, *, since_spec: str | None, now: datetime | None = None, store_path: Any = None
) -> BriefOutput:
    """Read the state store and build the brief (the store is opened read-only)."""
    moment = now or datetime.now(UTC)
    try:
        path = store_path or project.state_path(reading=True)
        store = StateStore.open(path, writer=False)
    except StateError as exc:
        since, label = parse_since(since_spec, now=moment, cursor=None)
        return _unavailable(moment, since, label, str(exc))
    with store:
        since, label = parse_since(since_spec, now=moment, cursor=store.get_meta(CURSOR_KEY))
        runs = store.runs.list(limit=None, since=since)
        result = BriefOutput(
            generated_at=rfc3339(moment),
            since=rfc3339(since),
            window=label,
            since_mode=SINCE_MODES.get(label),
            runs=runs_section(runs),
            drift=drift_section(runs),
            freshness=freshness_section(project, store, moment),
            quality=quality_section(store, since, runs),
            scheduler=scheduler_section(project, store, since, runs),
            cost=cost_section(runs),
        )
    if label == "last":
        result._after = lambda: advance_cursor(project, moment, store_path)
    return result


def advance_cursor(project: Project, moment: datetime, store_path: Any = None) -> None:
    """Store ``moment`` as the start of the next ``--since last`` window (best effort, warned about)."""
    try:
        # The writer's answer: a store read where an older engine left it is never written in place.
        path = store_path or project.state_path()
        with StateStore.open(path, writer=True) as store:
            store.set_meta(CURSOR_KEY, to_db(moment))
    except StateLockedError:
        log.warning("brief cursor not advanced: another rocky process holds the state store; the next "
                    "`rocky brief --since last` covers this window again")
    except StateError as exc:
        log.warning("brief cursor not advanced: %s", exc)


def _unavailable(now: datetime, since: datetime, label: str, reason: str) -> BriefOutput:
    return BriefOutput(
        generated_at=rfc3339(now), since=rfc3339(since), window=label,
        since_mode=SINCE_MODES.get(label),
        cost=CostSection(availability="unavailable", note=reason),
        runs=RunsSection(availability="unavailable", reason=reason),
        drift=DriftSection(availability="unavailable", reason=reason),
        freshness=FreshnessSection(availability="unavailable", reason=reason),
        quality=QualitySection(availability="unavailable", reason=reason),
        scheduler=SchedulerSection(availability="unavailable", reason=reason),
    )


# --- sections -------------------------------------------------------------------------------------------


def runs_section(runs: list[RunRecord]) -> RunsSection:
    if not runs:
        return RunsSection(availability="no_data")
    by_pipeline: dict[str, PipelineRuns] = {}
    section = RunsSection(availability="available", total=len(runs))
    for run in reversed(runs):  # oldest first, so "last" ends on the newest
        name = run.pipeline or "(unnamed)"
        entry = by_pipeline.setdefault(
            name, PipelineRuns(pipeline=name, total=0, succeeded=0, partial=0, failed=0)
        )
        entry.total += 1
        entry.last_status, entry.last_run_id = run.status, run.run_id
        if run.status == "Success":
            entry.succeeded += 1
            section.succeeded += 1
        elif run.status == "PartialFailure":
            entry.partial += 1
            section.partial += 1
        else:
            entry.failed += 1
            section.failed += 1
    section.pipelines = sorted(by_pipeline.values(), key=lambda p: p.pipeline)
    section.failures = [_failure(r) for r in runs if r.status != "Success"][:_LISTED]
    section.attention = [_attention(r) for r in runs if r.status != "Success"][:_LISTED]
    return section


def _attention(run: RunRecord) -> AttentionRun:
    failed = [AttentionModel(model_name=m.model_name, status=m.status) for m in run.models_executed
              if m.status not in ("success", "skipped")]
    return AttentionRun(
        run_id=run.run_id, status=run.status, started_at=rfc3339(run.started_at),
        finished_at=rfc3339(run.finished_at or run.started_at), trigger=run.trigger, failed_models=failed,
    )


def cost_section(runs: list[RunRecord]) -> CostSection:
    """What the runs took (durations: there is no cost model, so no dollars or bytes scanned)."""
    if not runs:
        return CostSection(availability="no_data")
    per_run = [RunCost(run_id=r.run_id, duration_ms=r.effective_duration_ms()) for r in runs]
    return CostSection(
        availability="available", per_run=per_run[:_LISTED], run_count=len(runs),
        total_duration_ms=sum(r.duration_ms for r in per_run), note="durations only: no cost model",
    )


def _failure(run: RunRecord) -> RunFailure:
    errors = _recorded(run.extra.get("errors"), TableError)
    failed = [".".join(e.asset_key) or "(run)" for e in errors]
    if not failed:
        failed = [m.model_name for m in run.models_executed if m.status not in ("success", "skipped")]
    first = next((e.error for e in errors if e.error), None)
    if first is None and run.extra.get("check_gate_failed"):
        first = "an error-severity check failed"
    return RunFailure(
        run_id=run.run_id, status=run.status, started_at=rfc3339(run.started_at), pipeline=run.pipeline,
        failed_models=failed, error=(first[:300] if first else None),
    )


def drift_section(runs: list[RunRecord]) -> DriftSection:
    if not runs:
        return DriftSection(availability="no_data")
    section = DriftSection(availability="available")
    for run in runs:
        for drift in _recorded([run.extra.get("drift")], DriftInfo):
            section.tables_drifted += drift.tables_drifted
            for action in drift.actions_taken[: max(0, _LISTED - len(section.events))]:
                section.events.append(DriftEvent(
                    run_id=run.run_id, pipeline=run.pipeline, table=action.table, action=action.action,
                    reason=action.reason, change=f"{action.table}: {action.action} ({action.reason})",
                    timestamp=rfc3339(run.started_at), graph_hash=run.config_hash or "",
                ))
    return section


def _recorded(items: Any, model: type[_Recorded]) -> list[_Recorded]:
    """The parts of a run record's ``extra`` (``errors``, ``drift``) read through their wire model; what
    does not read (a record from another version) is left out of the digest rather than failing it."""
    out: list[_Recorded] = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(model.model_validate(item))
        except ValueError:
            continue
    return out


def freshness_section(project: Project, store: StateStore, now: datetime) -> FreshnessSection:
    items: list[FreshnessItem] = []
    for name, pipeline in project.config.pipelines.items():
        if pipeline.type == "load":
            continue
        budget = _budget(project, name)
        latest = store.runs.latest(name, "Success")
        finished = (latest.finished_at or latest.started_at) if latest is not None else None
        age = int((now - finished).total_seconds()) if finished is not None else None
        stale = budget is not None and (age is None or age > budget)
        if finished is None and budget is None:
            items.append(FreshnessItem(pipeline=name, stale=False))
            continue
        items.append(
            FreshnessItem(
                pipeline=name, stale=stale, budget_seconds=budget, age_seconds=age,
                last_success_at=rfc3339(finished) if finished is not None else None,
            )
        )
    if not any(i.last_success_at or i.budget_seconds for i in items):
        return FreshnessSection(availability="no_data", pipelines=items)
    return FreshnessSection(availability="available", stale=sum(i.stale for i in items), pipelines=items)


def _budget(project: Project, name: str) -> int | None:
    pipeline = project.config.pipeline(name)
    lags: list[int] = []
    if pipeline.type == "transformation":
        try:
            models = project.load_models(name)
        except Exception:  # a model that does not load is validate's business, not the digest's
            models = None
        if models is not None:
            lags = [m.max_lag_seconds for m in models.models.values() if m.max_lag_seconds]
    if lags:
        return min(lags)
    if pipeline.schedule is not None and pipeline.schedule.freshness:
        return project.config.freshness.expected_lag_seconds
    return None


def quality_section(store: StateStore, since: datetime, runs: list[RunRecord]) -> QualitySection:
    rows = store.query(
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN passed = 0 THEN 1 ELSE 0 END), 0) FROM check_history "
        "WHERE recorded_at >= ?",
        (to_db(since),),
    )
    total, failed = int(rows[0][0]), int(rows[0][1])
    gate = sum(1 for r in runs if r.extra.get("check_gate_failed"))
    if total == 0 and gate == 0:
        return QualitySection(availability="no_data")
    rows = store.query(
        "SELECT run_id, table_key, check_name, severity FROM check_history "
        "WHERE recorded_at >= ? AND passed = 0 ORDER BY recorded_at DESC, id DESC LIMIT ?",
        (to_db(since), _LISTED),
    )
    failures = store.decoded(
        rows,
        lambda r: QualityFailure(
            run_id=str(r["run_id"]), table=str(r["table_key"]), check=str(r["check_name"]),
            severity=r["severity"],
        ),
    )
    return QualitySection(
        availability="available", checks_run=total, checks_failed=failed, gate_failed_runs=gate,
        failures=failures,
    )


def scheduler_section(
    project: Project, store: StateStore, since: datetime, runs: list[RunRecord]
) -> SchedulerSection:
    """The scheduler's own digest (paused pipelines, failure streaks, incidents), and the window's
    scheduler-started runs."""
    from rocky_engine.schedule.health import scheduler_brief

    section = scheduler_brief(project, store, since)
    if section.availability == "available":
        scheduled = [r for r in runs if r.submission_id is not None]
        section.scheduled_pipelines = sum(p.schedule is not None for p in project.config.pipelines.values())
        section.runs_in_window = len(scheduled)
        section.failed_in_window = sum(r.status != "Success" for r in scheduled)
    return section
