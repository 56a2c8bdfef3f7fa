"""``rocky.events``: one JSON line on stderr per finished model, table, check, drift or anomaly.

Under ``--output json`` a run writes each event while it goes on, as a log line of ``rocky_engine.logs``
(``ts``, ``level``, ``target``, ``message``) whose ``target`` is ``rocky.events`` and whose other keys are
the fields of :class:`RunEvent`. A reader (``dagster_rocky``) keeps the stderr lines whose ``target`` is
``rocky.events`` and reads each with ``RunEvent.model_validate``; the final document on stdout stays the
authority on the run's outcome.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from rocky_engine.wire.base import WireModel
from rocky_engine.wire.run import MaterializationMetadata

EVENTS_TARGET = "rocky.events"

EventType = Literal["materialized", "failed", "check", "drift", "anomaly"]
EventKind = Literal["model", "table"]


class EventCheck(WireModel):
    """A check result (``event == "check"``)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"detail", "observed", "expected"})

    name: str
    #: the check kind (``row_count``, ``null_rate``, an assertion type, ...)
    kind: str
    #: the column a per-column check (``null_rate``) or an assertion reads
    column: str | None = None
    passed: bool
    severity: str = "error"
    detail: str | None = None
    observed: float | None = None
    expected: float | None = None
    #: the measured details as the run document's ``check_results[].checks[]`` has them (``source_count``,
    #: ``lag_seconds``, ``failing_rows``, ``missing`` ...), so a reader of the events builds the same
    #: check result as a reader of the document
    details: dict[str, Any] = Field(default_factory=dict)


class EventDrift(WireModel):
    """A schema-drift action taken on the table (``event == "drift"``)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"reason", "columns"})

    action: str
    reason: str = ""
    columns: list[str] = Field(default_factory=list)


class EventAnomaly(WireModel):
    """A row count far from the table's recent baseline (``event == "anomaly"``; advisory)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"reason"})

    current_count: int
    baseline_avg: float
    deviation_pct: float
    reason: str = ""


class RunEvent(WireModel):
    """One ``rocky.events`` line: the log line's keys (``level`` is ``info``) and the event's fields."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {
            "ts", "level", "target", "message", "event", "kind", "pipeline", "name", "asset_key", "run_id",
            "duration_ms", "rows_copied", "row_count", "error", "check", "drift", "anomaly", "started_at",
            "metadata",
        }
    )

    ts: datetime
    level: str = "info"
    target: str = EVENTS_TARGET
    message: str = ""
    #: ``materialized``, ``failed``, ``check``, ``drift`` or ``anomaly`` (text: newer engines may add)
    event: str
    #: ``model`` or ``table``
    kind: str
    pipeline: str
    #: a model name, or a replicated table as ``schema.table``
    name: str
    asset_key: list[str] = Field(default_factory=list)
    run_id: str = ""
    duration_ms: int | None = None
    #: rows this run wrote
    rows_copied: int | None = None
    #: rows in the target after the run
    row_count: int | None = None
    error: str | None = None
    check: EventCheck | None = None
    drift: EventDrift | None = None
    anomaly: EventAnomaly | None = None
    #: ``materialized``: when the asset's work started and what the run document's
    #: ``materializations[].metadata`` says of it (strategy, watermark, target, SQL hash, column count),
    #: so a reader of the events builds the same materialization as a reader of the document
    started_at: str | None = None
    metadata: MaterializationMetadata | None = None
