"""The pipeline-level events the run dispatcher fires around every runner.

- ``pipeline_start``: before the runner does anything; an ``abort`` hook here stops the run before any
  work, and the run is recorded as a ``Failure`` whose error names the hook (so is an abort that a runner
  lets escape, e.g. from ``discover_complete``).
- ``pipeline_complete``: the runner returned with ``Success`` or ``PartialFailure`` (``metadata.status``
  tells which). An ``abort`` hook that fails here makes the run a ``Failure`` naming the hook
  (``failure_kind: "unknown"``, ``cause: "hook-abort"``); ``pipeline_error`` then fires for it.
- ``pipeline_error``: the run did not fully succeed: ``PartialFailure``, ``Failure``, an interrupt, or a
  ``RockyError`` that escaped the runner (the run is then a recorded ``Failure`` naming it, exactly like a
  runner's own failure); a refused request (bad flags, config, model files) or an internal error fires
  it before the error propagates.

So a partial failure fires both (it completed, and it needs attention), a success only
``pipeline_complete``, and a failure only ``pipeline_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocky_engine.errors import (
    ConfigError,
    HookAbort,
    ModelError,
    RockyError,
    RunInterrupted,
    UsageError,
)
from rocky_engine.hooks.sink import EventSink
from rocky_engine.logs import get_logger
from rocky_engine.run.concurrency import cause_of, cooldown_of, failure_kind_of
from rocky_engine.run.output import RunOutput
from rocky_engine.wire.run import TableError

log = get_logger("hooks")

#: errors that refuse the request itself (bad flags, config or model files) before the runner does work:
#: they stay the one ``error:`` line they always were (the CLI prints it, exit 1), with no run record
_REFUSALS = (UsageError, ConfigError, ModelError, RunInterrupted)

#: failed tables named in ``metadata.failed_tables`` (the full list is in the run's JSON and history)
_MAX_NAMED = 20


def start_run(
    events: EventSink, pipeline_type: str, metadata: dict[str, Any] | None = None
) -> RunOutput | None:
    """Fire ``pipeline_start``; return the output of an aborted run, or None to go on."""
    try:
        events.fire("pipeline_start", metadata={"pipeline_type": pipeline_type, **(metadata or {})})
    except HookAbort as exc:
        return aborted_output(exc, pipeline_type)
    return None


def run_with_hooks(events: EventSink, run: Callable[[], RunOutput], pipeline_type: str) -> RunOutput:
    """Fire ``pipeline_start`` and call ``run``.

    A hook abort (at ``pipeline_start``, or one that escaped the runner from an event it does not contain)
    becomes a recorded ``Failure`` naming the hook; so does any other ``RockyError`` that escaped the
    runner (a warehouse that refused the run, a state write that failed after some models landed): the
    caller records it and prints its document, and ``finish_run`` fires ``pipeline_error`` once. A
    refusal of the request (``_REFUSALS``) or an internal error fires ``pipeline_error`` and propagates.
    """
    aborted = start_run(events, pipeline_type)
    if aborted is not None:
        return aborted
    try:
        return run()
    except HookAbort as exc:
        log.error("run stopped: %s", exc)
        return aborted_output(exc, pipeline_type)
    except _REFUSALS as exc:
        fail_run(events, exc, pipeline_type)
        raise
    except RockyError as exc:
        log.error("run failed: %s", exc)
        return failed_output(exc, pipeline_type)
    except Exception as exc:
        fail_run(events, exc, pipeline_type)
        raise


def aborted_output(exc: HookAbort, pipeline_type: str) -> RunOutput:
    """The output of a run that a ``pipeline_start`` hook aborted: ``Failure``, nothing done."""
    return failed_output(exc, pipeline_type)


def failed_output(exc: RockyError, pipeline_type: str) -> RunOutput:
    """The output of a run an error stopped: ``Failure`` naming it. What the runner had done is lost with
    its frame; the run record still carries the model executions the runner kept."""
    return RunOutput(
        pipeline_type=pipeline_type,
        status="Failure",
        errors=[TableError(asset_key=[], error=str(exc), failure_kind=failure_kind_of(exc),
                           cooldown_seconds=cooldown_of(exc), cause=cause_of(exc))],
    )


def finish_run(
    events: EventSink, out: RunOutput, on_abort: Callable[[], None] | None = None
) -> None:
    """Fire ``pipeline_complete`` and/or ``pipeline_error`` for a finished run.

    Only an ``abort`` hook at ``pipeline_complete`` changes the run: it becomes a ``Failure`` whose errors
    name the hook, ``on_abort`` is called (the caller rewrites the run record) and ``pipeline_error``
    fires for it.
    """
    if out.status in ("Success", "PartialFailure") and not out.interrupted:
        try:
            events.fire("pipeline_complete", duration_ms=out.duration_ms, metadata=outcome_metadata(out))
        except HookAbort as exc:
            out.status = "Failure"
            out.errors.append(TableError(asset_key=[], error=str(exc), failure_kind=failure_kind_of(exc),
                                         cause=cause_of(exc)))
            if on_abort is not None:
                on_abort()
    if out.status in ("PartialFailure", "Failure") or out.interrupted:
        try:
            events.fire("pipeline_error", error=error_summary(out), duration_ms=out.duration_ms,
                        metadata=outcome_metadata(out))
        except HookAbort as exc:  # pragma: no cover - pipeline_error is not abortable
            log.warning("a pipeline_error hook asked to abort a finished run: %s", exc)


def fail_run(events: EventSink, exc: BaseException, pipeline_type: str) -> None:
    """Fire ``pipeline_error`` for an error that escaped the runner (the caller re-raises it)."""
    try:
        events.fire(
            "pipeline_error",
            error=str(exc) or type(exc).__name__,
            metadata={"status": "Failure", "exit_code": getattr(exc, "exit_code", 1),
                      "pipeline_type": pipeline_type},
        )
    except Exception as hook_exc:  # the original error is the one to report
        log.warning("pipeline_error hooks failed while reporting an error: %s", hook_exc)


def outcome_metadata(out: RunOutput) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "status": out.status,
        "exit_code": out.exit_code(),
        "tables_copied": out.tables_copied,
        "tables_failed": out.tables_failed,
    }
    if out.pipeline_type:
        meta["pipeline_type"] = out.pipeline_type
    if out.interrupted:
        meta["interrupted"] = True
    if out.check_gate_failed:
        meta["check_gate_failed"] = True
    failed = [".".join(e.asset_key) for e in out.errors if e.asset_key]
    if failed:
        meta["failed_tables"] = failed[:_MAX_NAMED]
    return meta


def error_summary(out: RunOutput) -> str:
    """One line saying what went wrong in a run that did not fully succeed."""
    if out.interrupted:
        return "the run was interrupted before it finished"
    # A run-level error (no asset key) such as a hook abort at pipeline_start explains the whole run.
    run_level = [e.error for e in out.errors if not e.asset_key]
    if run_level:
        return run_level[0]
    failed = [".".join(e.asset_key) for e in out.errors]
    if failed:
        named = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        first = out.errors[0].error
        return f"{len(failed)} table(s) failed ({named}); first error: {first}"
    if out.check_gate_failed:
        return "an error-severity check failed"
    return f"the run ended with status {out.status}"
