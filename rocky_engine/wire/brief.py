"""The ``rocky brief`` document: a digest of the estate since a moment (CONTRACT section 8).

Each section says whether it had something to say: ``availability`` = ``available`` | ``no_data`` |
``unavailable`` (with ``reason``); the scheduler section is ``not_applicable`` without schedules.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

Availability = Literal["available", "no_data", "unavailable"]


class RunFailure(WireModel):
    run_id: str
    status: str
    started_at: str
    pipeline: str | None = None
    failed_models: list[str] = Field(default_factory=list)
    #: the first error of the run, at most 300 characters
    error: str | None = None


class PipelineRuns(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"total", "succeeded", "partial", "failed"})

    pipeline: str
    total: int
    succeeded: int
    partial: int
    failed: int
    last_status: str | None = None
    last_run_id: str | None = None


class RunsSection(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "total", "succeeded", "partial", "failed"})

    availability: Availability
    total: int = 0
    succeeded: int = 0
    partial: int = 0
    failed: int = 0
    pipelines: list[PipelineRuns] = Field(default_factory=list)
    failures: list[RunFailure] = Field(default_factory=list)
    reason: str | None = None


class DriftEvent(WireModel):
    run_id: str
    table: str
    action: str
    reason: str
    pipeline: str | None = None


class DriftSection(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "tables_drifted"})

    availability: Availability
    tables_drifted: int = 0
    events: list[DriftEvent] = Field(default_factory=list)
    reason: str | None = None


class FreshnessItem(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"stale"})

    pipeline: str
    stale: bool
    last_success_at: str | None = None
    age_seconds: int | None = None
    budget_seconds: int | None = None


class FreshnessSection(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "stale"})

    availability: Availability
    stale: int = 0
    pipelines: list[FreshnessItem] = Field(default_factory=list)
    reason: str | None = None


class QualityFailure(WireModel):
    run_id: str
    table: str
    check: str
    severity: str | None = None


class QualitySection(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "checks_run", "checks_failed"})

    availability: Availability
    checks_run: int = 0
    checks_failed: int = 0
    gate_failed_runs: int = 0
    failures: list[QualityFailure] = Field(default_factory=list)
    reason: str | None = None


class PausedPipeline(WireModel):
    pipeline: str
    paused_at: str | None = None


class FailureStreak(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"last_outcome"})

    pipeline: str
    consecutive_failures: int
    last_outcome: str | None
    last_attempt_at: str | None = None


class SchedulerSection(WireModel):
    """Holds, failure streaks and incidents; written exactly as far as they were read (``paused: []``
    says no pipeline is held, an absent ``paused`` that the section is not available)."""

    OMIT_UNSET: ClassVar[bool] = True

    availability: Literal["available", "no_data", "unavailable", "not_applicable"]
    reason: str | None = None
    paused: list[PausedPipeline] | None = None
    consecutive_failures: list[FailureStreak] | None = None
    last_evaluated_at: str | None = None
    #: the incidents directory could not be read (``incidents_reason`` says why)
    incidents_availability: Literal["unavailable"] | None = None
    incidents_reason: str | None = None
    #: incident bundles recorded in the window, kept in total, and the newest one's path
    incident_count: int | None = None
    incidents_kept: int | None = None
    newest_incident: str | None = None


class BriefResult(WireModel):
    """``{version, command: "brief", generated_at, since, window, runs, drift, freshness, quality,
    scheduler}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "generated_at", "since", "window", "runs", "drift", "freshness", "quality",
         "scheduler"}
    )

    version: str = __version__
    command: Literal["brief"] = "brief"
    generated_at: str
    since: str
    #: what was asked: "last", "24h", "7d", ...
    window: str
    runs: RunsSection
    drift: DriftSection
    freshness: FreshnessSection
    quality: QualitySection
    scheduler: SchedulerSection
