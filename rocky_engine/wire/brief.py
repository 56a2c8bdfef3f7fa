"""The ``rocky brief`` document: a digest of the estate since a moment (CONTRACT section 8).

Each section says whether it had something to say: ``availability`` = ``available`` | ``no_data`` |
``unavailable`` (with ``reason``); the scheduler section is ``no_data`` without schedules.

The published client's shape is written beside ours: ``since_mode`` / ``since_timestamp``,
``runs.partial_failure`` and ``runs.attention``, each drift event's ``change`` / ``timestamp`` /
``graph_hash``, ``freshness.models`` and ``quality.models`` (empty: this engine measures freshness per
pipeline and records checks, not per-model profiles), the scheduler's window counts, and the ``cost``,
``agent_activity``, ``autonomy`` and ``escalations`` sections (run durations; no policy ledger here, so
those three are ``no_data``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published

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


class AttentionModel(WireModel):
    model_name: str
    status: str


class AttentionRun(WireModel):
    """A run that did not succeed, as the published client lists it (``runs.attention[]``)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"failed_models"})

    run_id: str
    status: str
    started_at: str
    finished_at: str
    trigger: str
    failed_models: list[AttentionModel] = Field(default_factory=list)


class RunsSection(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"availability", "total", "succeeded", "partial", "failed", "attention"}
    )

    availability: Availability
    total: int = 0
    succeeded: int = 0
    partial: int = published("partial_failure", 0)
    failed: int = 0
    pipelines: list[PipelineRuns] = Field(default_factory=list)
    failures: list[RunFailure] = Field(default_factory=list)
    attention: list[AttentionRun] = Field(default_factory=list)
    reason: str | None = None


class DriftEvent(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"graph_hash"})

    run_id: str
    table: str
    action: str
    reason: str
    pipeline: str | None = None
    #: ``<table>: <action> (<reason>)``, and when the run started
    change: str = ""
    timestamp: str = ""
    #: the config hash of the run that saw the change (``""`` when it recorded none)
    graph_hash: str = ""


class DriftSection(WireModel):
    #: ``events`` is required by the published client, ``[]`` included (a window without drift)
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "tables_drifted", "events"})

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
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "stale", "models"})

    availability: Availability
    stale: int = 0
    pipelines: list[FreshnessItem] = Field(default_factory=list)
    #: the published per-model list; always empty (freshness is per pipeline here: ``pipelines``)
    models: list[dict[str, str]] = Field(default_factory=list)
    reason: str | None = None


class QualityFailure(WireModel):
    run_id: str
    table: str
    check: str
    severity: str | None = None


class QualitySection(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "checks_run", "checks_failed", "models"})

    availability: Availability
    #: the published per-model profile list; always empty (the checks are in ``failures``)
    models: list[dict[str, str]] = Field(default_factory=list)
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

    availability: Literal["available", "no_data", "unavailable"]
    reason: str | None = None
    #: the paused pipelines' names, and since when each is held
    paused: list[str] | None = None
    holds: list[PausedPipeline] | None = None
    consecutive_failures: list[FailureStreak] | None = None
    #: configured pipelines with a schedule; runs the scheduler started in the window, and how many failed
    scheduled_pipelines: int | None = None
    runs_in_window: int | None = None
    failed_in_window: int | None = None
    last_evaluated_at: str | None = None
    #: the incidents directory could not be read (``incidents_reason`` says why)
    incidents_availability: Literal["unavailable"] | None = None
    incidents_reason: str | None = None
    #: incident bundles recorded in the window, kept in total, and the newest one's path
    incident_count: int | None = None
    incidents_kept: int | None = None
    newest_incident: str | None = None


class RunCost(WireModel):
    run_id: str
    duration_ms: int


class CostSection(WireModel):
    """What the window's runs took: durations only (no cost model here, so no dollars or bytes)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"availability", "per_run", "run_count", "total_duration_ms"}
    )

    availability: Availability
    per_run: list[RunCost] = Field(default_factory=list)
    run_count: int = 0
    total_duration_ms: int = 0
    note: str | None = None


class LedgerSection(WireModel):
    """A published section about the policy-decision ledger, which this engine has not: ``no_data``."""

    availability: Availability = "no_data"
    note: str = "no policy-decision ledger in this engine"


class AgentActivitySection(LedgerSection):
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"availability", "total", "allow", "deny", "require_review", "by_principal", "decisions"}
    )

    total: int = 0
    allow: int = 0
    deny: int = 0
    require_review: int = 0
    by_principal: list[dict[str, str]] = Field(default_factory=list)
    decisions: list[dict[str, str]] = Field(default_factory=list)


class AutonomySection(LedgerSection):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "active_freezes", "degraded_rules"})

    active_freezes: list[dict[str, str]] = Field(default_factory=list)
    degraded_rules: list[dict[str, str]] = Field(default_factory=list)


class EscalationsSection(LedgerSection):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"availability", "total", "pending", "ranking"})

    total: int = 0
    pending: list[dict[str, str]] = Field(default_factory=list)
    ranking: str = ""


SinceMode = Literal["last", "24h", "7d"]
#: the windows the published client names (``since_mode``); another span is written in ``window`` only
SINCE_MODES: dict[str, SinceMode] = {"last": "last", "24h": "24h", "7d": "7d"}


class BriefResult(WireModel):
    """``{version, command: "brief", generated_at, since, since_timestamp, window, since_mode?, runs, drift,
    freshness, quality, scheduler, cost, agent_activity, autonomy, escalations}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "generated_at", "since", "window", "runs", "drift", "freshness", "quality",
         "scheduler", "cost", "agent_activity", "autonomy", "escalations"}
    )

    version: str = __version__
    command: Literal["brief"] = "brief"
    generated_at: str
    since: str = published("since_timestamp")
    #: what was asked: "last", "24h", "7d", ...
    window: str
    #: ``window`` when it is one the published client names (``last``, ``24h``, ``7d``)
    since_mode: SinceMode | None = None
    runs: RunsSection
    drift: DriftSection
    freshness: FreshnessSection
    quality: QualitySection
    scheduler: SchedulerSection
    cost: CostSection = Field(default_factory=lambda: CostSection(availability="no_data"))
    agent_activity: AgentActivitySection = Field(default_factory=AgentActivitySection)
    autonomy: AutonomySection = Field(default_factory=AutonomySection)
    escalations: EscalationsSection = Field(default_factory=EscalationsSection)
