"""The one code path that runs a pipeline, whoever asked (CLI, scheduler child, server job).

Picks the pipeline, opens the state store as the single writer, claims the idempotency key (a skip
returns before any record or hook; see ``run.idempotency``), resolves ``--resume`` (``run.resume``), runs
the pipeline's runner under the interrupt guard, writes the run record in one transaction, and finalizes
the key on every exit path.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, Protocol

from rocky_engine.errors import AdapterError, StateError, StateLockedError, UsageError
from rocky_engine.hooks.lifecycle import finish_run, run_with_hooks
from rocky_engine.logs import get_logger
from rocky_engine.project import Project
from rocky_engine.run import idempotency
from rocky_engine.run.context import EventSink, NullEventSink, RunContext
from rocky_engine.run.interrupt import InterruptGuard
from rocky_engine.run.options import RunOptions
from rocky_engine.run.output import RunOutput
from rocky_engine.run.records import build_run_record
from rocky_engine.run.resume import resolve_resume
from rocky_engine.state.runs import ModelExecution
from rocky_engine.wire.run import TableError

#: pipeline type -> "module:Class" implementing PipelineRunner
RUNNERS: dict[str, str] = {
    "transformation": "rocky_engine.run.transformation:TransformationRunner",
    "replication": "rocky_engine.run.replication:ReplicationRunner",
    "quality": "rocky_engine.run.quality:QualityRunner",
    "snapshot": "rocky_engine.run.snapshot:SnapshotRunner",
}


class PipelineRunner(Protocol):
    executions: list[ModelExecution]

    def run(self) -> RunOutput: ...


def choose_pipeline(project: Project, requested: str | None) -> str:
    """The pipeline to run: ``--pipeline``, or the only one configured."""
    names = list(project.config.pipelines)
    if requested is not None:
        project.config.pipeline(requested)  # raises with the list of names
        return requested
    if not names:
        raise UsageError(
            f"{project.config.path} defines no pipeline", hint="add a [pipeline.NAME] table to rocky.toml"
        )
    if len(names) > 1:
        raise UsageError(
            f"this project has several pipelines ({', '.join(names)})",
            hint="choose one with --pipeline NAME",
        )
    return names[0]


def _runner_class(pipeline_type: str) -> Callable[[RunContext], PipelineRunner]:
    target = RUNNERS.get(pipeline_type)
    if target is None:
        raise UsageError(f"pipeline type '{pipeline_type}' cannot be run with `rocky run`")
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise UsageError(f"running {pipeline_type} pipelines is not supported by this build") from exc
    cls: Callable[[RunContext], PipelineRunner] = getattr(module, cls_name)
    return cls


def _event_sink(project: Project, run_id: str, pipeline: str) -> EventSink:
    """The run's hook dispatcher; without hooks (or hook warnings to log) the dispatcher is not even
    imported, which keeps ``subprocess`` and the hook machinery off the start-up path."""
    config = project.config
    if config.hook.empty and not any("[hook" in warning for warning in config.warnings):
        return NullEventSink()
    from rocky_engine.hooks.dispatcher import build_event_sink

    return build_event_sink(config, run_id, pipeline)


def execute_run(
    project: Project,
    options: RunOptions,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    events: EventSink | None = None,
) -> RunOutput:
    """Run one pipeline and record it."""
    from rocky_engine.state.remote.sync import open_synced_store

    log = get_logger("run")
    name = choose_pipeline(project, options.pipeline)
    pipeline = project.config.pipeline(name)
    if options.filter and pipeline.type != "replication":
        # Ignored silently, a filter would rebuild everything the user meant to narrow down.
        also = " or use --model NAME to run one model" if pipeline.type == "transformation" else ""
        raise UsageError(
            f"--filter applies to replication pipelines; '{name}' is a {pipeline.type} pipeline",
            hint=f"drop --filter{also}",
        )
    runner_cls = _runner_class(pipeline.type)
    on_newer: Literal["recreate", "refuse"] = (
        "recreate" if project.config.state.on_schema_mismatch == "recreate" else "refuse"
    )
    t0 = time.perf_counter()
    started_at = clock()
    key = options.idempotency_key
    if key and (options.resume or options.resume_latest):
        raise UsageError(
            "--idempotency-key cannot be combined with --resume/--resume-latest",
            hint="drop one of them: a resume is a new attempt of a specific run, a key dedupes runs",
        )
    try:
        # The local writer store; on a remote [state] backend, downloaded into before the run.
        synced = open_synced_store(project, on_newer=on_newer)
    except StateLockedError:
        # A run racing the same key: report the skip its claim would have produced, not the lock.
        if not key:
            raise
        skip = idempotency.peek_while_locked(
            project.state_path(), key, project.config.state.idempotency, clock, on_newer
        )
        if skip is None:
            raise
        log.info("idempotency key '%s' is held by %s; skipping (%s)", key, skip[1], skip[0])
        return idempotency.skipped_output(skip[0], key, skip[1], pipeline.type)
    with synced as store, InterruptGuard() as guard:
        run_id = store.runs.new_run_id(started_at)
        if key:
            decision = idempotency.claim(store, key, run_id, project.config.state.idempotency, clock())
            if not decision.proceed:
                # A skip writes no run record and fires no hooks (CONTRACT section 3).
                log.info("idempotency key '%s' already handled by %s; skipping (%s)",
                         key, decision.skipped_by_run_id, decision.skip_status)
                status = decision.skip_status or "SkippedIdempotent"
                return idempotency.skipped_output(status, key, decision.skipped_by_run_id, pipeline.type)
            if decision.adopted:
                log.warning("idempotency key '%s': the in-flight claim of %s expired; this run takes it over",
                            key, decision.previous_run_id)
        out: RunOutput | None = None
        try:
            resume = resolve_resume(store, options, name, pipeline.type, log)
            sink = events or _event_sink(project, run_id, name)
            ctx = RunContext(
                project=project,
                pipeline_name=name,
                options=options,
                store=store,
                run_id=run_id,
                started_at=started_at,
                guard=guard,
                log=log,
                events=sink,
                resumed_from=resume.run_id if resume else None,
                completed_keys=resume.completed if resume else frozenset(),
            )
            runner = runner_cls(ctx)
            # pipeline_start first; a hook abort becomes a recorded Failure, other errors fire pipeline_error.
            try:
                out = run_with_hooks(sink, runner.run, pipeline.type)
            except AdapterError as exc:
                # The warehouse could not be reached or refused the run before any table ran: still a
                # run (JSON on stdout, a run record saying what happened), not a bare error line.
                log.error("run %s failed before any table ran: %s", run_id, exc)
                out = RunOutput(
                    pipeline_type=pipeline.type,
                    status="Failure",
                    errors=[TableError(asset_key=[], error=str(exc), failure_kind=exc.failure_kind)],
                )
            out.run_id = run_id
            out.filter = options.filter or ""
            out.duration_ms = int((time.perf_counter() - t0) * 1000)
            out.idempotency_key = key
            if guard.stop.is_set():
                out.interrupted = True
            record = build_run_record(
                run_id=run_id,
                pipeline=name,
                out=out,
                started_at=started_at,
                finished_at=clock(),
                trigger=options.trigger,
                submission_id=options.submission_id,
                config_hash=project.config.config_hash,
                executions=runner.executions,
            )
            store.runs.insert(record)
        finally:
            if key:
                try:
                    idempotency.finalize(store, key, run_id, out, clock())
                except StateError as exc:  # never hide the run's own outcome or error behind this one
                    log.error("could not finalize idempotency key '%s': %s", key, exc)
        # Only a run that recorded itself uploads (a skip or an error never overwrites remote state).
        synced.upload(sink)
    if out.interrupted:
        log.warning("run %s interrupted by %s; recorded as %s", run_id, guard.signal_name or "signal",
                    out.status)
    # After the store is closed: a completion hook may itself call rocky (brief, another run).
    finish_run(sink, out)
    # Under Dagster Pipes (RockyResource.run_pipes) report materializations and checks; a no-op otherwise.
    from rocky_engine.run.pipes_report import report_to_pipes

    report_to_pipes(out)
    return out
