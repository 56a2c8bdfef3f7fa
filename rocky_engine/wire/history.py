"""The ``rocky history`` documents (CONTRACT section 8) and ``GET /api/v1/runs`` (the same, with the audit
fields)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel


class HistoryRunModel(WireModel):
    """One model (or table) a run executed, as ``runs[].models`` lists it."""

    model_name: str
    duration_ms: int = 0
    rows_affected: int | None = None
    status: str = ""
    #: the retry trail of a model that needed more than one try (``run.attempts``); omitted otherwise
    attempts: list[dict[str, Any]] = Field(default_factory=list)


class HistoryRun(WireModel):
    """One run in ``rocky history``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"started_at", "duration_ms", "status", "trigger", "models_executed", "models"}
    )

    run_id: str
    started_at: str = ""
    duration_ms: int = 0
    status: str = ""
    trigger: str = ""
    #: how many models (or tables) the run executed
    models_executed: int | list[Any] = 0
    #: what each of those models did (the published client requires the list, empty included)
    models: list[HistoryRunModel] = Field(default_factory=list)
    pipeline: str | None = None
    submission_id: str | None = None
    #: present (true) only for a run a signal, a drain or a timeout stopped
    interrupted: bool | None = None
    # --audit (and the server's runs route)
    hostname: str | None = None
    triggering_identity: str | None = None
    config_hash: str | None = None
    idempotency_key: str | None = None
    exit_code: int | None = None


class HistoryResult(WireModel):
    """``{version, command: "history", count, runs: [...]}``: the newest runs (``count`` of them)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "count", "runs"})

    version: str = __version__
    command: Literal["history"] = "history"
    count: int = 0
    runs: list[HistoryRun] = Field(default_factory=list)


class ModelExecutionRow(WireModel):
    """One execution of a model in ``rocky history --model``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"sql_hash"})

    run_id: str
    started_at: str
    model_name: str
    duration_ms: int
    rows_affected: int | None = None
    status: str
    #: the hash of the SQL that ran (``materializations[].metadata.sql_hash``); ``""`` when the run
    #: recorded none (a replicated table, or a run recorded before the hash was kept)
    sql_hash: str = ""


class ModelHistoryResult(WireModel):
    """``{version, command: "history", model, count, executions: [...]}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "count", "executions"})

    version: str = __version__
    command: Literal["history"] = "history"
    model: str
    count: int = 0
    executions: list[ModelExecutionRow] = Field(default_factory=list)
