"""The ``rocky run`` document (CONTRACT section 3), also what ``rocky run`` prints before exiting 1 or 2.

Names are those ``dagster_rocky`` has always exported (``RunResult``, ``MaterializationInfo`` ...). The
engine's ``RunOutput`` (``rocky_engine/run/output.py``) is this model plus its exit code and rendering.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, timestamp_text
from rocky_engine.wire.checks import TableCheckResult
from rocky_engine.wire.discover import ExcludedTable

RunStatus = Literal["Success", "PartialFailure", "Failure", "SkippedIdempotent", "SkippedInFlight"]
#: statuses that mean nothing needed doing (a run with the same idempotency key was handled)
SKIPPED_STATUSES: frozenset[str] = frozenset({"SkippedIdempotent", "SkippedInFlight"})


class MaterializationMetadata(WireModel):
    # the replication sets ``watermark`` after the copy (read in a batch): it is normalised then too
    model_config = ConfigDict(**WireModel.model_config, validate_assignment=True)

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"strategy", "target_table_full_name"})

    strategy: str = ""
    #: the new high-water mark; a timestamp is written in UTC with ``Z`` (``timestamp_text``)
    watermark: str | None = None
    target_table_full_name: str = ""
    sql_hash: str | None = None
    column_count: int | None = None
    #: snapshot pipelines: versions written, versions closed, and of those the ones whose key left the
    #: source (``invalidate_hard_deletes``)
    rows_inserted: int | None = None
    rows_closed: int | None = None
    rows_hard_deleted: int | None = None

    @field_validator("watermark")
    @classmethod
    def _utc_watermark(cls, value: str | None) -> str | None:
        return None if value is None else timestamp_text(value)


class AttemptInfo(WireModel):
    """One try at materializing a table or model (the published ``AttemptRecord``); written only for a
    materialization that was retried, the last entry being the try that stuck."""

    attempt: int
    duration_ms: int
    outcome: Literal["success", "failed"]
    error: str | None = None
    #: ``"transient"`` for a failure the retry policy retried (``"unknown"`` when the kind was unknown)
    failure_class: str | None = None
    #: the failed try's ``failure_kind`` (``transient``, ``connection-failed`` ...)
    transient_kind: str | None = None
    #: the wait after this try before the next one
    backoff_ms: int | None = None


class MaterializationInfo(WireModel):
    """One table or model the run materialized."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"duration_ms", "metadata"})

    asset_key: list[str]
    duration_ms: int = 0
    rows_copied: int | None = None
    started_at: str | None = None
    metadata: MaterializationMetadata = Field(default_factory=MaterializationMetadata)
    #: the retry trail (omitted for a first-try success): a retried-then-succeeded table says so
    attempts: list[AttemptInfo] = Field(default_factory=list)


class TableError(WireModel):
    """A table (or, with an empty ``asset_key``, the whole run) that failed, and why.

    ``failure_kind`` is one of CONTRACT section 3's eight values (the published client rejects any
    other). ``cause`` says what stopped it when that is not a warehouse failure the kinds describe:
    ``"hook-abort"``, an ``on_failure = "abort"`` hook (its kind is ``"unknown"``, ``error`` names the hook).
    """

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"asset_key", "failure_kind"})

    asset_key: list[str]
    error: str
    failure_kind: str = "unknown"
    cooldown_seconds: int | None = None
    cause: Literal["hook-abort"] | None = None


class ExecutionSummary(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"concurrency", "tables_processed", "tables_failed"})

    concurrency: int = 1
    tables_processed: int = 0
    tables_failed: int = 0


class PermissionsInfo(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"grants_added", "grants_revoked", "catalogs_created", "schemas_created"}
    )

    grants_added: int = 0
    grants_revoked: int = 0
    catalogs_created: int = 0
    schemas_created: int = 0


class DriftAction(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"reason", "asset_key"})

    #: the drifted table's asset key (as in ``materializations[]``); ``table`` is its full name
    asset_key: list[str] = Field(default_factory=list)
    table: str
    action: str
    reason: str = ""


class DriftInfo(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"tables_checked", "tables_drifted", "actions_taken"})

    tables_checked: int = 0
    tables_drifted: int = 0
    actions_taken: list[DriftAction] = Field(default_factory=list)


class AnomalyInfo(WireModel):
    """A row count far from the table's recent baseline (advisory: it never fails a run)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"reason"})

    table: str
    current_count: int
    baseline_avg: float
    deviation_pct: float
    reason: str = ""


class ContainedInfo(WireModel):
    """A model withheld because an upstream model failed."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"blocked_by", "unblock_hint"})

    model: str
    blocked_by: list[str] = Field(default_factory=list)
    unblock_hint: str = ""


class RunResult(WireModel):
    """``rocky run --output json``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {
            "version", "command", "status", "filter", "duration_ms", "tables_copied", "tables_failed",
            "materializations", "check_results", "execution", "metrics", "permissions", "drift",
            "interrupted", "check_gate_failed",
        }
    )

    version: str = __version__
    command: Literal["run"] = "run"
    status: RunStatus = "Success"
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
    #: why ``--resume-latest`` resumed nothing (the latest run succeeded): an ordinary incremental run
    resume_note: str | None = None
    idempotency_key: str | None = None
    skipped_by_run_id: str | None = None
    errors: list[TableError] = Field(default_factory=list)
    excluded_tables: list[ExcludedTable] = Field(default_factory=list)
    anomalies: list[AnomalyInfo] = Field(default_factory=list)
    contained: list[ContainedInfo] = Field(default_factory=list)
    #: an error-severity check failed with ``fail_on_error`` (exit 2 after a replication or transformation
    #: run whose data landed, exit 1 for a quality run); always written, so a reader tells the two kinds
    #: of exit 2 apart without guessing what an absent key means
    check_gate_failed: bool = False

    @property
    def succeeded(self) -> bool:
        """True for ``Success`` and the two idempotency skips (nothing needed doing)."""
        return (self.status == "Success" or self.status in SKIPPED_STATUSES) and not self.interrupted

    @property
    def skipped(self) -> bool:
        return self.status in SKIPPED_STATUSES
