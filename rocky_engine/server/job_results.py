"""What a job's row says once its child is gone: the result document, the run's JSON output, and the
recovery of rows a dead server left unfinished.

A finished job's ``result`` is ``rocky_engine.wire.jobs.JobResult``: the exit decides the outcome (a
timeout or a drain is a failure), the run record (matched by ``submission_id`` = ``job_id``) adds its id and
status, and ``output`` is the child's own ``--output json`` document (written to
``.rocky/jobs/<job_id>.out`` while it runs).
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

from rocky_engine.logs import get_logger
from rocky_engine.schedule.claim_lifecycle import outcome_of_exit, outcome_of_status
from rocky_engine.schedule.spawner import ChildResult
from rocky_engine.state._time import rfc3339
from rocky_engine.state.jobs import JobRow
from rocky_engine.state.store import StateStore
from rocky_engine.wire.jobs import JobDocument, JobOutcome, JobResult, JobTrigger

log = get_logger("server")

#: ``.rocky/jobs/<job_id>.out``: a running child's stdout (its JSON result), read into the job at the end
OUTPUT_DIR = "jobs"
MAX_OUTPUT_BYTES = 2 * 1024 * 1024


def output_path(dot_rocky: Path, job_id: str) -> Path | None:
    """Where the child of ``job_id`` writes its stdout (None when the directory cannot be made)."""
    directory = dot_rocky / OUTPUT_DIR
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("cannot create %s (%s); job results will not carry the run's JSON output", directory, exc)
        return None
    return directory / f"{job_id}.out"


def read_output(path: Path | None) -> dict[str, Any] | None:
    """The child's JSON document (then the file is removed); None when absent or not JSON."""
    if path is None:
        return None
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_OUTPUT_BYTES + 1)
    except OSError:
        return None
    finally:
        path.unlink(missing_ok=True)
    if len(data) > MAX_OUTPUT_BYTES:
        return {"omitted": f"the run's JSON output is over {MAX_OUTPUT_BYTES} bytes; see rocky history"}
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


#: a stored job row's kind -> the trigger of its run (an API job, kind ``run``, is ``manual``)
_TRIGGER_OF_KIND: dict[str, JobTrigger] = {"schedule": "schedule", "webhook": "webhook"}


def job_wire(row: JobRow) -> JobDocument:
    """``GET /api/v1/jobs/{id}``: the contract's seven keys always, the rest when known.

    The store keeps a scheduled run's trigger as the row's kind (``schedule`` / ``webhook``); on the wire
    every job is ``kind: "run"`` (the published ``JobStatus`` enum) and the trigger is its own field."""
    return JobDocument(
        job_id=row.job_id,
        kind="run",
        trigger=_TRIGGER_OF_KIND.get(row.kind, "manual"),
        state=row.state,
        submitted_at=rfc3339(row.submitted_at),
        started_at=rfc3339(row.started_at) if row.started_at else None,
        finished_at=rfc3339(row.finished_at) if row.finished_at else None,
        result=JobResult.model_validate(row.result) if row.result is not None else None,
        pipeline=row.pipeline or None,
        request=row.request,
        error=row.error or None,
        pid=row.pid,
        attempts=row.attempts,
    )


def finished_row(
    row: JobRow, result: ChildResult, store: StateStore | None, now: datetime,
    output: dict[str, Any] | None = None,
) -> JobRow:
    """The row after its child ended: outcome from the exit (a timeout or a drain is a failure), the run
    record's id and status when the child recorded one."""
    outcome: JobOutcome
    if not result.started or result.timed_out or result.drained:
        outcome = "failure"
    else:
        outcome = outcome_of_exit(result.exit_code)
    doc = JobResult(
        outcome=outcome, exit_code=result.exit_code, duration_ms=result.duration_ms, output=output,
    )
    record = store.runs.by_submission_id(row.job_id) if store is not None else None
    if record is not None:
        doc.run_id, doc.status = record.run_id, record.status
    error = None
    if not result.started:
        error = "the child `rocky run` could not be started (see the server log)"
    elif result.drained:
        doc.drained = True
        error = "terminated by the server's shutdown drain; not retried"
    elif result.timed_out:
        doc.timed_out = True
        error = "exceeded the pipeline's timeout_minutes and was terminated"
    elif outcome == "partial":
        error = "partial success: some models failed (exit 2)"
    elif outcome == "failure":
        error = f"rocky run exited {result.exit_code}"
    return row.with_(
        state="succeeded" if outcome == "success" else "failed", finished_at=now, result=doc.wire(),
        error=error, pid=result.pid,
    )


def recovered_row(store: StateStore, row: JobRow, now: datetime) -> JobRow:
    """A job left unfinished by a server that is gone, finalized from its run record (or failed)."""
    record = store.runs.by_submission_id(row.job_id)
    if record is None:
        return row.with_(
            state="failed", finished_at=now,
            result=JobResult(outcome="failure", exit_code=None, recovered=True).wire(),
            error="the server that launched this job stopped and its child is gone without a run record; "
            "not retried",
        )
    outcome = outcome_of_status(record.status)
    return row.with_(
        state="succeeded" if outcome == "success" else "failed",
        finished_at=record.finished_at or now,
        result=JobResult(outcome=outcome, exit_code=record.exit_code, run_id=record.run_id,
                         status=record.status, recovered=True).wire(),
        error=None if outcome == "success" else f"run {record.run_id} ended {record.status}",
    )


def owner_alive(owner: dict[str, Any] | None, me: dict[str, Any]) -> bool:
    """Is the server that launched a job still running (this process, or a live ``rocky serve`` here)?"""
    if not owner:
        return False
    if owner.get("instance") == me.get("instance"):
        return True
    pid = owner.get("pid")
    if owner.get("hostname") != socket.gethostname() or not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # alive and unreadable: assume it is the server
    return b"serve" in argv
