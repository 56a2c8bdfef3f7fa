"""The run's event stream: one ``rocky.events`` line per finished model or table, check, drift action and
anomaly, written while the run goes on (CONTRACT in docs/reference-cli.md, "Streaming events").

Under ``--output json`` each event is a log line of ``rocky_engine.logs`` (target ``rocky.events``, the
fields of ``wire.events.RunEvent``) on stderr, flushed as it is written; under Dagster Pipes the same
materializations and checks go to the Pipes session as they happen (``run.pipes_report``). With neither,
the stream is inactive and every call returns at once: a run people watch in a terminal pays nothing.

The runners call it from the places their results are made (``stream.materialized`` next to the
``MaterializationInfo`` they append, ...); the stdout document stays the authority on the run's outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rocky_engine.logs import get_logger, json_lines_active
from rocky_engine.wire.checks import AssertionCheck, CheckResult, ColumnMatchCheck
from rocky_engine.wire.events import EVENTS_TARGET, EventAnomaly, EventCheck, EventDrift, RunEvent
from rocky_engine.wire.metadata import check_metadata

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseSession
    from rocky_engine.run.pipes_report import PipesReporter
    from rocky_engine.wire.run import AnomalyInfo, MaterializationInfo

#: the keys the log line itself writes (``logs._JsonLineFormatter``); the rest of an event are its fields
_LINE_KEYS = frozenset({"ts", "level", "target", "message"})


class RunEventStream:
    """The events of one run of one pipeline."""

    def __init__(self, pipeline: str, run_id: str, *, lines: bool | None = None,
                 pipes: PipesReporter | None = None) -> None:
        self.pipeline = pipeline
        self.run_id = run_id
        self._lines = json_lines_active() if lines is None else lines
        self._pipes = pipes
        self._log = get_logger(EVENTS_TARGET.removeprefix("rocky."))
        #: someone listens: callers may spend a statement on what only an event reports (the row count)
        self.active = self._lines or pipes is not None

    @classmethod
    def open(cls, pipeline: str, run_id: str) -> RunEventStream:
        from rocky_engine.run.pipes_report import pipes_reporter

        return cls(pipeline, run_id, pipes=pipes_reporter())

    def materialized(
        self, kind: str, name: str, mat: MaterializationInfo, row_count: int | None = None
    ) -> None:
        if not self.active:
            return
        if self._pipes is not None:
            self._pipes.materialization(mat, self.run_id, row_count, pipeline=self.pipeline,
                                        finished_at=datetime.now(UTC))
        rows = f", {mat.rows_copied} row(s) written" if mat.rows_copied is not None else ""
        self._emit(f"{kind} {name} materialized in {mat.duration_ms} ms{rows}", event="materialized",
                   kind=kind, name=name, asset_key=mat.asset_key, duration_ms=mat.duration_ms,
                   rows_copied=mat.rows_copied, row_count=row_count, started_at=mat.started_at,
                   metadata=mat.metadata)

    def failed(self, kind: str, name: str, asset_key: list[str], error: str, duration_ms: int | None) -> None:
        if self.active:
            self._emit(f"{kind} {name} failed: {error}", event="failed", kind=kind, name=name,
                       asset_key=asset_key, duration_ms=duration_ms, error=error)

    def checks(self, kind: str, name: str, asset_key: list[str], checks: Iterable[CheckResult]) -> None:
        """One event per check result of one table."""
        if not self.active:
            return
        for check in checks:
            if self._pipes is not None:
                self._pipes.check(asset_key, check)
            verdict = "passed" if check.passed else "failed"
            self._emit(f"check {check.name} {verdict} on {kind} {name}", event="check", kind=kind, name=name,
                       asset_key=asset_key, check=event_check(check), error=check.error)

    def drift(self, kind: str, name: str, asset_key: list[str], action: str, reason: str,
              columns: list[str]) -> None:
        if not self.active:
            return
        event = self._event(f"drift on {kind} {name}: {action} ({reason})", event="drift", kind=kind,
                            name=name, asset_key=asset_key,
                            drift=EventDrift(action=action, reason=reason, columns=columns))
        if self._pipes is not None:
            self._pipes.observation(event)
        self._write(event)

    def anomaly(self, kind: str, name: str, asset_key: list[str], anomaly: AnomalyInfo) -> None:
        if not self.active:
            return
        event = self._event(f"anomaly on {kind} {name}: {anomaly.reason}", event="anomaly", kind=kind,
                            name=name, asset_key=asset_key, anomaly=EventAnomaly(
                                current_count=anomaly.current_count, baseline_avg=anomaly.baseline_avg,
                                deviation_pct=anomaly.deviation_pct, reason=anomaly.reason))
        if self._pipes is not None:
            self._pipes.observation(event)
        self._write(event)

    def _event(self, message: str, **fields: Any) -> RunEvent:
        return RunEvent(ts=datetime.now(UTC), message=message, pipeline=self.pipeline, run_id=self.run_id,
                        **fields)

    def _write(self, event: RunEvent) -> None:
        if self._lines:
            doc = {k: v for k, v in event.wire().items() if k not in _LINE_KEYS}
            self._log.info(event.message, extra={"fields": doc})

    def _emit(self, message: str, **fields: Any) -> None:
        if self._lines:
            self._write(self._event(message, **fields))


def event_check(check: CheckResult) -> EventCheck:
    """A check result as an event's ``check``: its kind, the number it is summarised by and what that
    number is held against."""
    details = check.details
    kind = check.kind if isinstance(check, AssertionCheck) else check.TAG
    expected: Any = {
        "row_count": details.get("source_count"), "freshness": details.get("threshold_seconds"),
        "null_rate": details.get("threshold"),
    }.get(kind, 0 if isinstance(check, AssertionCheck) and check.number() is not None else None)
    detail = check.error
    if detail is None and isinstance(check, ColumnMatchCheck) and (check.missing or check.extra):
        missing, extra = ", ".join(check.missing or []) or "-", ", ".join(check.extra or []) or "-"
        detail = f"missing: {missing}; extra: {extra}"
    observed = check.number()
    column = details.get("column")
    return EventCheck(
        name=check.name, kind=kind, column=column if isinstance(column, str) else None,
        passed=check.passed, severity=check.severity, detail=detail,
        observed=float(observed) if isinstance(observed, int | float) else None,
        expected=float(expected) if isinstance(expected, int | float) and not isinstance(expected, bool)
        else None,
        details=check_metadata(check),
    )


def count_rows_after(stream: RunEventStream, session: WarehouseSession, qualified: str) -> int | None:
    """The rows in a target after it was written, for the event (``row_count``); None when nobody listens
    or the count fails (an event never fails a table)."""
    if not stream.active:
        return None
    from rocky_engine.checks.builtin import count_rows
    from rocky_engine.errors import AdapterError

    try:
        return count_rows(session, qualified)
    except AdapterError:
        return None
