"""The one code path that runs a pipeline, whoever asked (CLI, scheduler child, server job).

Picks the pipeline, opens the state store as the single writer, runs the pipeline's runner under the
interrupt guard, and writes the run record in one transaction on every exit path.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, Protocol

from rocky_engine.errors import UsageError
from rocky_engine.logs import get_logger
from rocky_engine.project import Project
from rocky_engine.run.context import EventSink, NullEventSink, RunContext
from rocky_engine.run.interrupt import InterruptGuard
from rocky_engine.run.options import RunOptions
from rocky_engine.run.output import RunOutput
from rocky_engine.run.records import build_run_record
from rocky_engine.state.runs import ModelExecution

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


def execute_run(
    project: Project,
    options: RunOptions,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    events: EventSink | None = None,
) -> RunOutput:
    """Run one pipeline and record it."""
    from rocky_engine.state.store import StateStore

    log = get_logger("run")
    name = choose_pipeline(project, options.pipeline)
    pipeline = project.config.pipeline(name)
    runner_cls = _runner_class(pipeline.type)
    on_newer: Literal["recreate", "refuse"] = (
        "recreate" if project.config.state.on_schema_mismatch == "recreate" else "refuse"
    )
    t0 = time.perf_counter()
    started_at = clock()
    with StateStore.open(project.state_path(), writer=True, on_newer=on_newer) as store, \
            InterruptGuard() as guard:
        run_id = store.runs.new_run_id(started_at)
        ctx = RunContext(
            project=project,
            pipeline_name=name,
            options=options,
            store=store,
            run_id=run_id,
            started_at=started_at,
            guard=guard,
            log=log,
            events=events or NullEventSink(),
        )
        runner = runner_cls(ctx)
        out = runner.run()
        out.run_id = run_id
        out.filter = options.filter or ""
        out.duration_ms = int((time.perf_counter() - t0) * 1000)
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
    if out.interrupted:
        log.warning("run %s interrupted by %s; recorded as %s", run_id, guard.signal_name or "signal", out.status)
    return out
