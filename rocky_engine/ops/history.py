"""``rocky history``: past runs read back from the state store (CONTRACT section 8).

The newest 50 runs, or with ``--model`` the newest 50 executions of one model. ``--audit`` adds the
governance trail of each run (host, identity, config hash, idempotency key, exit code).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import PrivateAttr

from rocky_engine.errors import UsageError
from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.state._time import rfc3339, utc
from rocky_engine.state.runs import RunRecord
from rocky_engine.state.store import StateStore
from rocky_engine.wire.history import HistoryResult, HistoryRun, ModelExecutionRow, ModelHistoryResult

HISTORY_LIMIT = 50
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class HistoryOutput(HistoryResult, Result):
    """``rocky history``: the newest runs, rendered."""

    #: --audit was asked for: the table shows the audit columns (not part of the JSON document).
    _audit: bool = PrivateAttr(default=False)

    def render_table(self) -> str:
        if not self.runs:
            return "no runs recorded yet\n"
        headers, rows = self._grid()
        return render_rows(None, headers, rows)

    def render_md(self) -> str:
        if not self.runs:
            return "_no runs recorded yet_\n"
        headers, rows = self._grid()
        return md_table(headers, rows)

    def _grid(self) -> tuple[list[str], list[list[str]]]:
        audit = self._audit
        headers = ["RUN ID", "STARTED", "DURATION", "STATUS", "TRIGGER", "MODELS", "PIPELINE"]
        if audit:
            headers += ["HOST", "IDENTITY", "EXIT", "IDEMPOTENCY KEY", "CONFIG HASH"]
        rows: list[list[str]] = []
        for r in self.runs:
            row = [
                r.run_id, r.started_at, human_duration(r.duration_ms), r.status, r.trigger,
                str(r.models_executed), r.pipeline or "",
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
        return render_rows(f"model {self.model}", *self._grid())

    def render_md(self) -> str:
        if not self.executions:
            return f"_no recorded executions of model `{self.model}`_\n"
        return f"**model `{self.model}`**\n\n" + md_table(*self._grid())

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
    store: StateStore, *, model: str | None = None, since: datetime | None = None, audit: bool = False
) -> HistoryOutput | ModelHistoryOutput:
    """The history document for an open store."""
    records = store.runs.list(limit=HISTORY_LIMIT, since=since, model=model)
    if model is not None:
        return ModelHistoryOutput(model=model, executions=model_rows(records, model))
    result = HistoryOutput(runs=[history_run(r, audit=audit) for r in records])
    result._audit = audit
    return result


def history_run(record: RunRecord, *, audit: bool) -> HistoryRun:
    run = HistoryRun(
        run_id=record.run_id,
        started_at=rfc3339(record.started_at),
        duration_ms=record.effective_duration_ms(),
        status=record.status,
        trigger=record.trigger,
        models_executed=len(record.models_executed),
        pipeline=record.pipeline,
        submission_id=record.submission_id,
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
