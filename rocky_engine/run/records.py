"""Build the run record (CONTRACT section 3) from a finished run."""

from __future__ import annotations

import getpass
import socket
from datetime import datetime

from rocky_engine.run.output import RunOutput
from rocky_engine.state.runs import ModelExecution, RunRecord


def build_run_record(
    *,
    run_id: str,
    pipeline: str,
    out: RunOutput,
    started_at: datetime,
    finished_at: datetime,
    trigger: str,
    submission_id: str | None,
    config_hash: str | None,
    executions: list[ModelExecution],
) -> RunRecord:
    extra: dict[str, object] = {}
    if out.resumed_from:
        extra["resumed_from"] = out.resumed_from
    if out.tables_skipped is not None:
        extra["tables_skipped"] = out.tables_skipped
    if out.errors:
        extra["errors"] = [e.wire() for e in out.errors[:50]]
    if out.check_gate_failed:
        extra["check_gate_failed"] = True
    if out.drift.tables_drifted:
        extra["drift"] = out.drift.wire()
    return RunRecord(
        run_id=run_id,
        pipeline=pipeline,
        pipeline_type=out.pipeline_type,
        started_at=started_at,
        finished_at=finished_at,
        status=out.status,
        trigger=trigger,
        submission_id=submission_id,
        models_executed=executions,
        config_hash=config_hash,
        triggering_identity=_identity(),
        hostname=socket.gethostname(),
        idempotency_key=out.idempotency_key,
        exit_code=out.exit_code(),
        interrupted=out.interrupted,
        duration_ms=out.duration_ms,
        extra=extra,
    )


def _identity() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
