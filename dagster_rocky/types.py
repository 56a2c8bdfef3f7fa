"""Pydantic models of the engine's JSON documents (CONTRACT sections 3, 4 and 8).

This module is the one place the integration knows the wire format. Unknown fields are ignored so a newer
engine that adds fields keeps working; optional fields the engine omits take their documented defaults.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ErrorClass = Literal["transient", "timeout", "rate_limit", "auth", "unknown"]


class _Wire(BaseModel):
    """Base of every wire model: extra fields ignored, fields reachable by alias and by name."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# --- rocky discover ------------------------------------------------------------------------------------


class TableInfo(_Wire):
    """One table of a discovered source."""

    name: str
    row_count: int | None = None


class SourceInfo(_Wire):
    """One discovered source (a connector schema), its components and its tables."""

    id: str
    #: schema-pattern components in pattern order; a variadic component holds a list
    components: dict[str, str | list[str]] = Field(default_factory=dict)
    source_type: str
    #: when the upstream connector last finished a sync (timezone-aware), None when unknown
    last_sync_at: datetime | None = None
    tables: list[TableInfo] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class FailedSourceOutput(_Wire):
    """A source the discovery adapter tried and failed to read: never to be treated as deleted."""

    id: str
    schema_: str = Field(default="", alias="schema")
    source_type: str = ""
    error_class: str = "unknown"
    message: str = ""
    cooldown_seconds: int | None = None


class FreshnessCheckConfig(_Wire):
    threshold_seconds: int


class DiscoverChecks(_Wire):
    """Checks the project declares for discovered tables (only freshness is reported by discover)."""

    freshness: FreshnessCheckConfig | None = None


class DiscoverResult(_Wire):
    """``rocky discover --output json``."""

    version: str = ""
    command: str = "discover"
    sources: list[SourceInfo] = Field(default_factory=list)
    checks: DiscoverChecks | None = None
    failed_sources: list[FailedSourceOutput] = Field(default_factory=list)
    excluded_tables: list[str] = Field(default_factory=list)


# --- rocky run -----------------------------------------------------------------------------------------


class MaterializationMetadata(_Wire):
    strategy: str = ""
    watermark: str | None = None
    target_table_full_name: str = ""
    sql_hash: str | None = None
    column_count: int | None = None


class MaterializationInfo(_Wire):
    """One table or model the run materialized."""

    asset_key: list[str]
    duration_ms: int = 0
    rows_copied: int | None = None
    started_at: str | None = None
    metadata: MaterializationMetadata = Field(default_factory=MaterializationMetadata)


class CheckResult(_Wire):
    """One check of one table: ``{name, passed, severity, ...detail}``; the detail fields are kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    passed: bool
    severity: str = "error"

    @property
    def details(self) -> dict[str, Any]:
        """The check-specific fields (``source_count``, ``lag_seconds``, ``failing_rows`` ...)."""
        return dict(self.model_extra or {})


class TableCheckResult(_Wire):
    asset_key: list[str]
    checks: list[CheckResult] = Field(default_factory=list)


class TableError(_Wire):
    asset_key: list[str]
    error: str
    failure_kind: str = "unknown"
    cooldown_seconds: int | None = None


class ExecutionSummary(_Wire):
    concurrency: int = 1
    tables_processed: int = 0
    tables_failed: int = 0


class PermissionsInfo(_Wire):
    grants_added: int = 0
    grants_revoked: int = 0
    catalogs_created: int = 0
    schemas_created: int = 0


class DriftAction(_Wire):
    table: str
    action: str
    reason: str = ""


class DriftInfo(_Wire):
    tables_checked: int = 0
    tables_drifted: int = 0
    actions_taken: list[DriftAction] = Field(default_factory=list)


class AnomalyInfo(_Wire):
    table: str
    current_count: int
    baseline_avg: float
    deviation_pct: float
    reason: str = ""


class ContainedInfo(_Wire):
    model: str
    blocked_by: list[str] = Field(default_factory=list)
    unblock_hint: str = ""


RunStatus = Literal["Success", "PartialFailure", "Failure", "SkippedIdempotent", "SkippedInFlight"]


class RunResult(_Wire):
    """``rocky run --output json`` (also what ``rocky run`` prints before exiting 1 or 2)."""

    version: str = ""
    command: str = "run"
    status: str = "Success"
    filter: str = ""
    duration_ms: int = 0
    tables_copied: int = 0
    tables_failed: int = 0
    materializations: list[MaterializationInfo] = Field(default_factory=list)
    check_results: list[TableCheckResult] = Field(default_factory=list)
    execution: ExecutionSummary = Field(default_factory=ExecutionSummary)
    metrics: dict[str, Any] | None = None
    permissions: PermissionsInfo = Field(default_factory=PermissionsInfo)
    drift: DriftInfo = Field(default_factory=DriftInfo)
    interrupted: bool = False
    pipeline_type: str | None = None
    run_id: str | None = None
    tables_skipped: int | None = None
    resumed_from: str | None = None
    idempotency_key: str | None = None
    skipped_by_run_id: str | None = None
    errors: list[TableError] = Field(default_factory=list)
    excluded_tables: list[str] = Field(default_factory=list)
    anomalies: list[AnomalyInfo] = Field(default_factory=list)
    contained: list[ContainedInfo] = Field(default_factory=list)
    check_gate_failed: bool = False

    @property
    def succeeded(self) -> bool:
        """True for ``Success`` and the two idempotency skips (nothing needed doing)."""
        return self.status in ("Success", "SkippedIdempotent", "SkippedInFlight") and not self.interrupted

    @property
    def skipped(self) -> bool:
        return self.status in ("SkippedIdempotent", "SkippedInFlight")


# --- operator commands ---------------------------------------------------------------------------------


class HistoryRun(_Wire):
    run_id: str
    started_at: str = ""
    duration_ms: int = 0
    status: str = ""
    trigger: str = ""
    models_executed: int | list[Any] = 0
    pipeline: str | None = None
    submission_id: str | None = None


class HistoryResult(_Wire):
    """``rocky history --output json``."""

    version: str = ""
    command: str = "history"
    runs: list[HistoryRun] = Field(default_factory=list)


class DoctorCheck(_Wire):
    name: str
    status: str
    message: str = ""
    duration_ms: int = 0


class DoctorResult(_Wire):
    """``rocky doctor --output json`` (exit 3 on a Critical check is still a result)."""

    version: str = ""
    command: str = "doctor"
    overall: str = ""
    checks: list[DoctorCheck] = Field(default_factory=list)
    suggestions: list[str | dict[str, Any]] = Field(default_factory=list)

    @property
    def critical(self) -> bool:
        return self.overall == "critical" or any(c.status == "critical" for c in self.checks)
