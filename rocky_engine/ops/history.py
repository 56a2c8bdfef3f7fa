"""``rocky history``: past runs read back from the state store (CONTRACT section 8).

The newest 50 runs, or with ``--model`` the newest 50 executions of one model. ``--audit`` adds the
governance trail of each run (host, identity, config hash, idempotency key, exit code). ``--status``,
``--trigger`` and ``--pipeline`` narrow the runs in the query itself, before the 50-run window, so the
scheduled runs of a busy project are not crowded out by its manual ones. How it reads to a person (a
coloured table on a terminal, Slack-ready Markdown) is ``history_render``'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import PrivateAttr

from rocky_engine.errors import UsageError
from rocky_engine.ops import history_render as render
from rocky_engine.ops.md_text import when
from rocky_engine.output import Result
from rocky_engine.state._time import rfc3339, utc
from rocky_engine.state.runs import NOT_EXECUTED, RUN_STATUSES, RUN_TRIGGERS, RunRecord
from rocky_engine.state.store import StateStore
from rocky_engine.wire.history import (
    HistoryResult,
    HistoryRun,
    HistoryRunModel,
    ModelExecutionRow,
    ModelHistoryResult,
)

HISTORY_LIMIT = 50
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class HistoryOutput(HistoryResult, Result):
    """``rocky history``: the newest runs, rendered."""

    #: --audit was asked for: the table shows the audit columns (not part of the JSON document).
    _audit: bool = PrivateAttr(default=False)
    #: the filters applied, in words (empty: none), for the people-facing forms
    _note: str = PrivateAttr(default="")

    def render_table(self) -> str:
        if not self.runs:
            return f"no runs {'match ' + self._note if self._note else 'recorded yet'}\n"
        headers, rows = self._grid()
        styles = [render.row_style(r.status, bool(r.interrupted)) for r in self.runs]
        return render.table(None, headers, rows, styles)

    def render_md(self) -> str:
        counts = {
            "failed": sum(r.status == "Failure" for r in self.runs),
            "partial": sum(r.status == "PartialFailure" for r in self.runs),
            "interrupted": sum(bool(r.interrupted) for r in self.runs),
        }
        lines = [render.md_title(f"{len(self.runs)} run(s), newest first", counts, self._note)]
        if not self.runs:
            lines.append(f"- no runs {'match' if self._note else 'recorded yet'}")
        for r in self.runs:
            details = [human_duration(r.duration_ms), r.trigger, f"{r.models_executed} model(s)"]
            if self._audit:
                details += [
                    f"host `{r.hostname}`" if r.hostname else "",
                    f"exit {r.exit_code}" if r.exit_code is not None else "",
                    f"key `{r.idempotency_key}`" if r.idempotency_key else "",
                ]
            lines.append(
                render.md_run_line(r.status, bool(r.interrupted), r.pipeline, r.run_id, r.started_at, details)
            )
        return "\n".join(lines) + "\n"

    def _grid(self) -> tuple[list[str], list[list[str]]]:
        audit = self._audit
        headers = ["RUN ID", "STARTED", "DURATION", "STATUS", "TRIGGER", "MODELS", "PIPELINE"]
        if audit:
            headers += ["HOST", "IDENTITY", "EXIT", "IDEMPOTENCY KEY", "CONFIG HASH"]
        rows: list[list[str]] = []
        for r in self.runs:
            row = [
                r.run_id, r.started_at, human_duration(r.duration_ms),
                render.status_text(r.status, bool(r.interrupted)), r.trigger, str(r.models_executed),
                r.pipeline or "",
            ]
            if audit:
                row += [
                    r.hostname or "", r.triggering_identity or "",
                    "" if r.exit_code is None else str(r.exit_code), r.idempotency_key or "",
                    (r.config_hash or "")[:12],
                ]
            rows.append(row)
        return headers, rows


class ModelHistoryOutput(ModelHistoryResult, Result):
    """``rocky history --model NAME``: one model's executions, rendered."""

    def render_table(self) -> str:
        if not self.executions:
            return f"no recorded executions of model '{self.model}'\n"
        styles = [render.row_style(e.status) for e in self.executions]
        return render.table(f"model {self.model}", *self._grid(), styles)

    def render_md(self) -> str:
        failed = sum(e.status != "success" for e in self.executions)
        lines = [render.md_title(f"model `{self.model}`, {len(self.executions)} execution(s)",
                                 {"not successful": failed}, "")]
        if not self.executions:
            lines.append("- no recorded executions")
        for e in self.executions:
            rows = "" if e.rows_affected is None else f"{e.rows_affected} row(s)"
            lead = e.status if e.status == "success" else f"*{e.status.upper()}*"
            lines.append(
                f"- {lead} `{e.run_id}` at {when(e.started_at)} · {human_duration(e.duration_ms)}"
                + (f" · {rows}" if rows else "")
            )
        return "\n".join(lines) + "\n"

    def _grid(self) -> tuple[list[str], list[list[str]]]:
        headers = ["RUN ID", "STARTED", "DURATION", "ROWS", "STATUS"]
        rows = [
            [
                e.run_id, e.started_at, human_duration(e.duration_ms),
                "" if e.rows_affected is None else str(e.rows_affected), e.status,
            ]
            for e in self.executions
        ]
        return headers, rows


@dataclass(frozen=True)
class HistoryFilters:
    """``--status``, ``--trigger`` and ``--pipeline``, checked and normalised (see :func:`parse_filters`)."""

    statuses: tuple[str, ...] = ()
    triggers: tuple[str, ...] = ()
    pipeline: str | None = None

    def note(self) -> str:
        """The filters in words, for the people-facing forms (empty when there are none)."""
        parts = []
        if self.statuses:
            parts.append(f"status {' or '.join(self.statuses)}")
        if self.triggers:
            parts.append(f"trigger {' or '.join(self.triggers)}")
        if self.pipeline:
            parts.append(f"pipeline `{self.pipeline}`")
        return ", ".join(parts)


def parse_filters(
    store: StateStore,
    *,
    statuses: Sequence[str] = (),
    triggers: Sequence[str] = (),
    pipeline: str | None = None,
    configured: Iterable[str] = (),
) -> HistoryFilters:
    """Check the filter flags against what can be recorded; each flag may repeat or list values
    separated by commas, and matches case-insensitively.

    Args:
        configured: the pipelines of rocky.toml (when it loads); a pipeline with recorded runs only (removed
            from rocky.toml since) is accepted too.

    Raises:
        UsageError: an unknown status, trigger or pipeline, naming the valid ones (a typo would otherwise
            read as "no runs").
    """
    wanted = _values(statuses)
    found = tuple(_one_of(v, RUN_STATUSES, "--status", "statuses") for v in wanted)
    kinds: list[str] = []
    for value in _values(triggers):
        known = {t.lower(): t for t in RUN_TRIGGERS}
        if value.lower() in known:
            kinds.append(known[value.lower()])
            continue
        # ROCKY_RUN_TRIGGER may have recorded a trigger of its own (``Airflow``): it is as valid as the rest
        recorded = store.runs.recorded("trigger")
        valid = tuple(dict.fromkeys([*RUN_TRIGGERS, *recorded]))
        kinds.append(_one_of(value, valid, "--trigger", "triggers"))
    if pipeline is not None:
        names = set(configured)
        if pipeline not in names:
            names |= set(store.runs.recorded("pipeline"))
            if pipeline not in names:
                shown = ", ".join(sorted(names)) or "(none configured or recorded)"
                raise UsageError(
                    f"unknown pipeline '{pipeline}' for --pipeline; pipelines configured or with recorded "
                    f"runs: {shown}"
                )
    return HistoryFilters(statuses=found, triggers=tuple(dict.fromkeys(kinds)), pipeline=pipeline)


def _values(flags: Sequence[str]) -> list[str]:
    return [v.strip() for flag in flags for v in flag.split(",") if v.strip()]


def _one_of(value: str, valid: tuple[str, ...], flag: str, what: str) -> str:
    for candidate in valid:
        if candidate.lower() == value.lower():
            return candidate
    raise UsageError(f"unknown {flag} '{value}'; valid {what}: {', '.join(valid)}")


def parse_since(text: str) -> datetime:
    """``--since``: a date (``YYYY-MM-DD``, midnight UTC) or an RFC 3339 timestamp with an offset.

    Raises:
        UsageError: anything else.
    """
    value = text.strip()
    problem = (
        f"invalid --since '{text}': use a date (YYYY-MM-DD, UTC) or an RFC 3339 timestamp such as "
        "2026-03-01T08:00:00Z"
    )
    try:
        if _DATE.match(value):
            return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(problem) from None
    if parsed.tzinfo is None:
        raise UsageError(problem)
    return utc(parsed)


def build_history(
    store: StateStore,
    *,
    model: str | None = None,
    since: datetime | None = None,
    audit: bool = False,
    filters: HistoryFilters | None = None,
) -> HistoryOutput | ModelHistoryOutput:
    """The history document for an open store."""
    f = filters or HistoryFilters()
    records = store.runs.list(
        limit=HISTORY_LIMIT, since=since, model=model, statuses=f.statuses, triggers=f.triggers,
        pipeline=f.pipeline,
    )
    if model is not None:
        rows = model_rows(records, model)
        return ModelHistoryOutput(model=model, count=len(rows), executions=rows)
    result = HistoryOutput(count=len(records), runs=[history_run(r, audit=audit) for r in records])
    result._audit = audit
    result._note = f.note()
    return result


def history_run(record: RunRecord, *, audit: bool) -> HistoryRun:
    run = HistoryRun(
        run_id=record.run_id,
        started_at=rfc3339(record.started_at),
        duration_ms=record.effective_duration_ms(),
        status=record.status,
        trigger=record.trigger,
        # what ran: the record also lists the models the run never built (``NOT_EXECUTED``)
        models_executed=sum(1 for m in record.models_executed if m.status not in NOT_EXECUTED),
        models=[
            HistoryRunModel(model_name=m.model_name, duration_ms=m.duration_ms, rows_affected=m.rows_affected,
                            status=m.status, attempts=m.attempts or [])
            for m in record.models_executed
        ],
        pipeline=record.pipeline,
        submission_id=record.submission_id,
        interrupted=True if record.interrupted else None,
    )
    if audit:
        run.hostname = record.hostname
        run.triggering_identity = record.triggering_identity
        run.config_hash = record.config_hash
        run.idempotency_key = record.idempotency_key
        run.exit_code = record.exit_code
    return run


def model_rows(records: Sequence[RunRecord], model: str) -> list[ModelExecutionRow]:
    rows: list[ModelExecutionRow] = []
    for record in records:
        for execution in record.models_executed:
            if execution.model_name != model:
                continue
            rows.append(
                ModelExecutionRow(
                    run_id=record.run_id,
                    started_at=rfc3339(execution.started_at),
                    model_name=execution.model_name,
                    duration_ms=execution.duration_ms,
                    rows_affected=execution.rows_affected,
                    status=execution.status,
                    sql_hash=execution.sql_hash or "",
                )
            )
    return rows[:HISTORY_LIMIT]


def human_duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
