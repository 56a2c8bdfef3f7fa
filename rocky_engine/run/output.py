"""The ``rocky run`` JSON document (CONTRACT section 3) and its exit-code rules."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.output import Result, WireModel, md_table, render_rows

RunStatus = Literal["Success", "PartialFailure", "Failure", "SkippedIdempotent", "SkippedInFlight"]


class MaterializationMetadata(WireModel):
    strategy: str
    watermark: str | None = None
    target_table_full_name: str
    sql_hash: str | None = None
    column_count: int | None = None


class Materialization(WireModel):
    asset_key: list[str]
    duration_ms: int
    rows_copied: int | None = None
    started_at: str | None = None
    metadata: MaterializationMetadata


class TableCheckResult(WireModel):
    """Checks of one table: ``checks[] = {name, passed, severity, ...detail}``."""

    asset_key: list[str]
    checks: list[dict[str, Any]] = Field(default_factory=list)
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"checks"})


class TableError(WireModel):
    asset_key: list[str]
    error: str
    failure_kind: str
    cooldown_seconds: int | None = None


class ExecutionSummary(WireModel):
    concurrency: int
    tables_processed: int
    tables_failed: int


class Permissions(WireModel):
    grants_added: int = 0
    grants_revoked: int = 0
    catalogs_created: int = 0
    schemas_created: int = 0
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"grants_added", "grants_revoked", "catalogs_created", "schemas_created"}
    )


class DriftAction(WireModel):
    table: str
    action: str
    reason: str


class Drift(WireModel):
    tables_checked: int = 0
    tables_drifted: int = 0
    actions_taken: list[DriftAction] = Field(default_factory=list)
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"tables_checked", "tables_drifted", "actions_taken"})


class Anomaly(WireModel):
    table: str
    current_count: int
    baseline_avg: float
    deviation_pct: float
    reason: str


class Contained(WireModel):
    model: str
    blocked_by: list[str]
    unblock_hint: str


class RunOutput(Result):
    """The result of one ``rocky run``."""

    version: str = __version__
    command: str = "run"
    status: RunStatus = "Success"
    filter: str = ""
    duration_ms: int = 0
    tables_copied: int = 0
    tables_failed: int = 0
    materializations: list[Materialization] = Field(default_factory=list)
    check_results: list[TableCheckResult] = Field(default_factory=list)
    execution: ExecutionSummary = Field(
        default_factory=lambda: ExecutionSummary(concurrency=1, tables_processed=0, tables_failed=0)
    )
    metrics: dict[str, Any] | None = None
    permissions: Permissions = Field(default_factory=Permissions)
    drift: Drift = Field(default_factory=Drift)
    interrupted: bool = False
    pipeline_type: str | None = None
    run_id: str | None = None
    tables_skipped: int | None = None
    resumed_from: str | None = None
    idempotency_key: str | None = None
    skipped_by_run_id: str | None = None
    errors: list[TableError] = Field(default_factory=list)
    excluded_tables: list[str] = Field(default_factory=list)
    anomalies: list[Anomaly] = Field(default_factory=list)
    contained: list[Contained] = Field(default_factory=list)
    check_gate_failed: bool | None = None

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {
            "version", "command", "status", "filter", "duration_ms", "tables_copied", "tables_failed",
            "materializations", "check_results", "execution", "metrics", "permissions", "drift",
            "interrupted",
        }
    )

    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.status == "PartialFailure":
            return 2
        if self.status == "Failure":
            return 1
        return 0

    def render_table(self) -> str:
        lines = [
            f"run {self.run_id or ''}  status={self.status}  duration={self.duration_ms / 1000:.2f}s  "
            f"materialized={self.tables_copied}  failed={self.tables_failed}"
            + ("  INTERRUPTED" if self.interrupted else "")
        ]
        if self.skipped_by_run_id:
            lines.append(f"skipped: idempotency key already handled by {self.skipped_by_run_id}")
        rows = [
            [
                ".".join(m.asset_key),
                m.metadata.strategy,
                "" if m.rows_copied is None else str(m.rows_copied),
                f"{m.duration_ms}",
            ]
            for m in self.materializations
        ]
        if rows:
            lines.append(render_rows(None, ["table", "strategy", "rows", "ms"], rows))
        if self.errors:
            lines.append(
                render_rows(
                    "errors",
                    ["table", "kind", "error"],
                    [[".".join(e.asset_key), e.failure_kind, e.error] for e in self.errors],
                )
            )
        if self.contained:
            lines.append(
                render_rows(
                    "withheld (upstream failed)",
                    ["model", "blocked by"],
                    [[c.model, ", ".join(c.blocked_by)] for c in self.contained],
                )
            )
        # A quality run is all checks: list every one; elsewhere only the failures are worth a line.
        show_all = self.pipeline_type == "quality"
        check_rows = [
            [".".join(r.asset_key), str(c.get("name")), "passed" if c.get("passed", True) else "FAILED",
             str(c.get("severity"))]
            for r in self.check_results
            for c in r.checks
            if show_all or not c.get("passed", True)
        ]
        if check_rows:
            title = "checks" if show_all else "failed checks"
            lines.append(render_rows(title, ["table", "check", "result", "severity"], check_rows))
        return "\n".join(lines) + "\n"

    def render_md(self) -> str:
        head = f"**rocky run** `{self.run_id or ''}`: {self.status} in {self.duration_ms / 1000:.2f}s\n\n"
        rows = [
            [".".join(m.asset_key), m.metadata.strategy, str(m.rows_copied or ""), str(m.duration_ms)]
            for m in self.materializations
        ]
        body = md_table(["table", "strategy", "rows", "ms"], rows) if rows else ""
        errs = "".join(f"- `{'.'.join(e.asset_key)}` ({e.failure_kind}): {e.error}\n" for e in self.errors)
        return head + body + ("\n" + errs if errs else "")


def derive_status(succeeded: int, problems: int) -> RunStatus:
    """No problem: Success; progress with a problem: PartialFailure; a problem and no progress: Failure."""
    if problems == 0:
        return "Success"
    return "PartialFailure" if succeeded > 0 else "Failure"
