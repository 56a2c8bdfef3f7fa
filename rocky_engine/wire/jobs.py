"""``rocky serve``'s jobs: ``GET /api/v1/jobs``, ``GET /api/v1/jobs/{id}``, ``POST /api/v1/jobs/run``.

A finished job's ``result`` is ``{outcome, exit_code, duration_ms?, run_id?, status?, output?, drained?,
timed_out?, recovered?}``: the exit decides the outcome, the run record (matched by ``submission_id`` =
``job_id``) adds its id and status, and ``output`` is the child's own ``--output json`` document.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from rocky_engine.wire.base import WireModel

JobState = Literal["queued", "running", "succeeded", "failed"]
JobOutcome = Literal["success", "partial", "failure"]


class JobResult(WireModel):
    """What a finished job's child did (also stored in the ``jobs`` table)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"exit_code"})

    outcome: JobOutcome
    #: None when the server that launched the child is gone and no run record tells
    exit_code: int | None
    duration_ms: int | None = None
    run_id: str | None = None
    status: str | None = None
    #: the child's JSON document (or ``{"omitted": reason}`` when it was too large)
    output: dict[str, Any] | None = None
    drained: bool | None = None
    timed_out: bool | None = None
    #: finalized by a later server from the run record (or failed without one)
    recovered: bool | None = None


#: what started a job's run (a job's ``kind`` is always ``run``: the published ``JobStatus`` knows no other
#: kind this server has)
JobTrigger = Literal["manual", "schedule", "webhook"]


class JobDocument(WireModel):
    """One job: the contract's seven keys always, the rest when known."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"started_at", "finished_at", "result", "attempts", "trigger"}
    )

    job_id: str
    kind: Literal["run"] = "run"
    #: ``manual`` (``POST /api/v1/jobs/run``), or the resident scheduler's ``schedule`` / ``webhook``
    trigger: JobTrigger = "manual"
    state: JobState
    submitted_at: str
    started_at: str | None
    finished_at: str | None
    result: JobResult | None
    pipeline: str | None = None
    #: what asked for the job: the API body, or ``{trigger, attempt}`` for a scheduled run
    request: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    pid: int | None = None
    attempts: int = 1


class JobList(WireModel):
    """``GET /api/v1/jobs``: newest first."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"jobs"})

    jobs: list[JobDocument] = Field(default_factory=list)


class JobAccepted(WireModel):
    """``202`` of ``POST /api/v1/jobs/run``."""

    job_id: str
    state: JobState
