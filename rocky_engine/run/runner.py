"""The one code path that runs a pipeline, whoever asked (CLI, scheduler child, server job).

:func:`execute_run` is the order; :class:`RunSteps` holds one method per step:

1. ``open_store``: the run's writer store (downloaded into on a remote ``[state]``); a run racing the
   holder of the same idempotency key reports the skip instead of the lock (``run.idempotency``);
2. ``claim``: mint the run id and claim the key (a skip returns here: no run record, no hooks);
3. ``run``: resolve ``--resume``, build the context and the runner, run it between ``pipeline_start``
   and the runner's own events, under the interrupt guard;
4. ``record``: the run record, in one transaction;
5. ``finalize``: close the key's claim, on every exit path of a run that claimed one;
6. ``upload``: the state to the remote backend, only for a run that recorded itself;
7. ``settle``: a signal that came after the record still makes the run interrupted;
8. ``report``: after the store is closed: the interrupt line, the completion hooks, the Pipes report
   (an ``abort`` hook at ``pipeline_complete`` fails the run: the store is opened again to record it).

Steps 3 to 8 share a :class:`RunOutcome`: ``run`` fills it, the later steps read it, so what a run
records, finalizes, uploads and prints is decided in one place. Exit code, JSON document and run record
always tell one story (CONTRACT section 3): when a step after the record fails (the upload, the key's
finalize) the run becomes a ``Failure`` naming the error (exit 1), its record is rewritten to say so and
its document is still printed; a stopped run is never a ``Success`` (``RunOutcome.settle_interrupt``).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from rocky_engine.errors import RockyError, StateError, StateLockedError, UsageError
from rocky_engine.hooks.sink import EventSink, NullEventSink
from rocky_engine.logs import get_logger
from rocky_engine.project import Project
from rocky_engine.run import idempotency
from rocky_engine.run.context import RunContext
from rocky_engine.run.interrupt import InterruptGuard
from rocky_engine.run.lifecycle import finish_run, run_with_hooks
from rocky_engine.run.options import RunOptions
from rocky_engine.run.output import RunOutput
from rocky_engine.run.records import build_run_record
from rocky_engine.run.resume import resolve_resume, resume_pipeline
from rocky_engine.state._time import now_utc
from rocky_engine.state.runs import ModelExecution, RunRecord
from rocky_engine.wire.run import TableError

if TYPE_CHECKING:
    from rocky_engine.state.remote.sync import SyncedStore
    from rocky_engine.state.store import StateStore

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


def choose_pipeline(
    project: Project, requested: str | None, *, resume: str | None = None, resume_latest: bool = False
) -> str:
    """The pipeline to run: ``--pipeline``, or the only one configured; a resume without ``--pipeline``
    picks the replication pipeline it resumes (``resume_pipeline``)."""
    names = list(project.config.pipelines)
    if requested is not None:
        project.config.pipeline(requested)  # raises with the list of names
        return requested
    if not names:
        raise UsageError(
            f"{project.config.path} defines no pipeline", hint="add a [pipeline.NAME] table to rocky.toml"
        )
    if len(names) > 1 and (resume or resume_latest):
        return resume_pipeline(project, resume)
    if len(names) > 1:
        raise UsageError(
            f"this project has several pipelines ({', '.join(names)})",
            hint="choose one with --pipeline NAME",
        )
    return names[0]


def execute_run(
    project: Project,
    options: RunOptions,
    *,
    clock: Callable[[], datetime] = now_utc,
    events: EventSink | None = None,
) -> RunOutput:
    """Run one pipeline and record it: the steps of the module docstring, in this order.

    Args:
        clock: the run's clock (UTC); the runners and their hooks read every timestamp from it.
        events: the event sink (default: the project's hooks).
    """
    run = RunSteps(project, options, clock=clock, events=events)
    skipped = run.open_store()
    if skipped is not None:
        return skipped
    with run.synced as store, InterruptGuard() as guard:
        skipped = run.claim(store)
        if skipped is not None:
            return skipped  # no run record, no hooks (CONTRACT section 3)
        try:
            run.run(store, guard)
            run.record(store)
        finally:
            run.finalize(store)  # every exit path; the run's own error, if any, still propagates
        run.upload(store)  # only a run that recorded itself: a skip or an error never overwrites remote state
        run.settle(store)
    return run.report()  # the store is closed: a completion hook may itself call rocky


@dataclass
class RunOutcome:
    """What one run came to; ``run`` fills it and every later step reads it."""

    run_id: str
    #: the runner's result, completed with the run's id, duration, key and interrupt flag
    output: RunOutput | None = None
    executions: list[ModelExecution] = field(default_factory=list)
    #: the run record is written (the upload and the completion hooks may follow)
    recorded: bool = False

    @property
    def succeeded(self) -> bool:
        """What the idempotency key is finalized as: only an uninterrupted ``Success`` is done."""
        out = self.output
        return out is not None and out.status == "Success" and not out.interrupted

    def settle_interrupt(self, stopped: bool) -> bool:
        """Mark the run interrupted when a signal stopped it (``stopped``); True when that changed it.

        A stopped run is never a ``Success``: whatever it did not get to is undone work. It keeps the
        status its progress earned: ``PartialFailure`` when something landed, else ``Failure`` (exit 130).
        """
        out = self.output
        if out is None or not (stopped or out.interrupted):
            return False
        changed = not out.interrupted
        out.interrupted = True
        if out.status == "Success":
            out.status = "PartialFailure" if out.materializations else "Failure"
            changed = True
        return changed

    def fail_after(self, error: str) -> None:
        """A step after the run's work failed (the state upload, the key's finalize): the run did not do
        what was asked, whatever landed, so it is a ``Failure`` (exit 1) whose errors name the step."""
        out = self.output
        assert out is not None, "only a run that returned can fail after its work"
        out.status = "Failure"
        out.errors.append(TableError(asset_key=[], error=error, failure_kind="unknown"))


class RunSteps:
    """The steps of one run (see the module docstring); build it, then call them as ``execute_run`` does.

    Building it checks the request before anything opens: the pipeline exists (or is the only one), the
    flags fit its type, and ``--idempotency-key`` is not combined with a resume.
    """

    synced: SyncedStore
    outcome: RunOutcome
    guard: InterruptGuard

    def __init__(
        self,
        project: Project,
        options: RunOptions,
        *,
        clock: Callable[[], datetime] = now_utc,
        events: EventSink | None = None,
    ) -> None:
        self.project = project
        self.options = options
        self.clock = clock
        self.log = get_logger("run")
        self.name = choose_pipeline(project, options.pipeline, resume=options.resume,
                                    resume_latest=options.resume_latest)
        self.pipeline_type: str = project.config.pipeline(self.name).type
        _check_flags(self.name, self.pipeline_type, options)
        self.runner_cls = _runner_class(self.pipeline_type)
        self.on_newer: Literal["recreate", "refuse"] = (
            "recreate" if project.config.state.on_schema_mismatch == "recreate" else "refuse"
        )
        self.t0 = time.perf_counter()
        self.started_at = clock()
        self.key = options.idempotency_key
        self._given_events = events
        #: the run's sink; the project's hooks once ``run`` has built it
        self.events: EventSink = NullEventSink()
        self.claimed = False
        self.finished_at = self.started_at

    # 1 ------------------------------------------------------------------------------------------------

    def open_store(self) -> RunOutput | None:
        """Open the writer store into ``synced``; or the skip of a run racing the holder of its key.

        Raises:
            StateLockedError: another writer holds the store (and the key, if any, does not say skip).
        """
        from rocky_engine.state.remote.sync import open_synced_store

        project = self.project
        try:
            self.synced = open_synced_store(
                project.state_path(), project.config.state, namespace=project.state_namespace,
                on_newer=self.on_newer, wait_for_lock=self.options.wait_for_lock,
            )
        except StateLockedError:
            if not self.key:
                raise
            decision = idempotency.peek_while_locked(
                project.state_path(reading=True), self.key, project.config.state.idempotency, self.clock,
                self.on_newer,
            )
            if decision is None:
                raise
            self.log.info("idempotency key '%s' is held by %s; skipping (%s)", self.key,
                          decision.skipped_by_run_id, decision.skip_status)
            return idempotency.skipped_output(decision, self.key, self.pipeline_type)
        return None

    # 2 ------------------------------------------------------------------------------------------------

    def claim(self, store: StateStore) -> RunOutput | None:
        """Mint the run id and claim the idempotency key; the skip's output when the key says so."""
        self.outcome = RunOutcome(run_id=store.runs.new_run_id(self.started_at))
        if not self.key:
            return None
        decision = idempotency.claim(
            self.synced.idempotency, self.key, self.outcome.run_id, self.project.config.state.idempotency,
            self.clock(),
        )
        if not decision.proceed:
            self.log.info("idempotency key '%s' already handled by %s; skipping (%s)",
                          self.key, decision.skipped_by_run_id, decision.skip_status)
            return idempotency.skipped_output(decision, self.key, self.pipeline_type)
        self.claimed = True
        if decision.holder_dead:
            self.log.warning(
                "idempotency key '%s': %s, which held it in flight, is no longer running on this host "
                "(killed?); this run takes the key over", self.key, decision.previous_run_id,
            )
        elif decision.adopted:
            self.log.warning(
                "idempotency key '%s': the in-flight claim of %s expired; this run takes it over",
                self.key, decision.previous_run_id,
            )
        return None

    # 3 ------------------------------------------------------------------------------------------------

    def run(self, store: StateStore, guard: InterruptGuard) -> None:
        """Run the pipeline's runner (``pipeline_start`` first; a hook abort there is a recorded Failure,
        other errors fire ``pipeline_error`` and propagate) and complete ``outcome.output``."""
        self.guard = guard
        run_id = self.outcome.run_id
        resume = resolve_resume(store, self.options, self.name, self.pipeline_type, self.log)
        if self._given_events is not None:
            self.events = self._given_events
        else:
            self.events = _event_sink(self.project, run_id, self.name, self.clock)
        ctx = RunContext(
            project=self.project,
            pipeline_name=self.name,
            options=self.options,
            store=store,
            run_id=run_id,
            started_at=self.started_at,
            guard=guard,
            log=self.log,
            events=self.events,
            resumed_from=resume.run_id if resume else None,
            completed_keys=resume.completed if resume else frozenset(),
            clock=self.clock,
        )
        runner = self.runner_cls(ctx)
        # A RockyError that escapes the runner (a refused warehouse, a failed state write after some
        # models landed) comes back as a Failure naming it: still a run, recorded and printed.
        out = run_with_hooks(self.events, runner.run, self.pipeline_type)
        out.run_id = run_id
        out.filter = self.options.filter or ""
        out.duration_ms = int((time.perf_counter() - self.t0) * 1000)
        out.idempotency_key = self.key
        if resume is not None and resume.note is not None:
            out.resume_note = resume.note
        self.outcome.output = out
        self.outcome.executions = runner.executions
        self.outcome.settle_interrupt(guard.stop.is_set())

    # 4 ------------------------------------------------------------------------------------------------

    def record(self, store: StateStore) -> None:
        """Write the run record (one transaction)."""
        self.finished_at = self.clock()
        store.runs.insert(self._record())
        self.outcome.recorded = True

    def amend(self, store: StateStore) -> None:
        """Rewrite the run record after the outcome changed (a failed upload or finalize, a late signal);
        a store that cannot take it is logged: the document on stdout still says what happened."""
        if not self.outcome.recorded:
            return
        try:
            store.runs.replace(self._record())
        except StateError as exc:
            self.log.error("could not update the record of run %s to %s: %s", self.outcome.run_id,
                           self.outcome.output.status if self.outcome.output else "?", exc)

    def _record(self) -> RunRecord:
        out = self.outcome.output
        assert out is not None, "record follows a run that returned"
        return build_run_record(
            run_id=self.outcome.run_id,
            pipeline=self.name,
            out=out,
            started_at=self.started_at,
            finished_at=self.finished_at,
            trigger=self.options.trigger,
            submission_id=self.options.submission_id,
            config_hash=self.project.config.config_hash,
            executions=self.outcome.executions,
        )

    # 5 ------------------------------------------------------------------------------------------------

    def finalize(self, store: StateStore) -> None:
        """Close the key's claim (succeeded or failed, per ``outcome``).

        A failure here never hides the run's own error; after a recorded run it makes the run a
        ``Failure`` (the key stays in flight: every retry would be skipped until its TTL), recorded so.
        """
        if not self.claimed:
            return
        assert self.key is not None
        try:
            idempotency.finalize(
                self.synced.idempotency, self.key, self.outcome.run_id, self.outcome.succeeded, self.clock()
            )
        except StateError as exc:
            message = f"could not finalize idempotency key '{self.key}': {exc}"
            self.log.error(message)
            if self.outcome.recorded:
                self.outcome.fail_after(message)
                self.amend(store)

    # 6 ------------------------------------------------------------------------------------------------

    def upload(self, store: StateStore) -> None:
        """Upload the state (a no-op on the local backend) and fire ``state_synced`` when it landed.

        An upload that fails under ``on_upload_failure = "fail"``, or loses a ``cas`` race, makes the run
        a ``Failure`` (exit 1): its key is finalized failed (a retry may run again) and its local record
        rewritten; the error is logged as the one ``error:`` line (``SyncedStore.upload`` says why).
        """
        t0 = time.perf_counter()
        try:
            uploaded = self.synced.upload()
        except RockyError as exc:
            self.log.error(str(exc))
            was_done = self.outcome.succeeded
            self.outcome.fail_after(str(exc))
            if self.claimed and was_done:
                self.finalize(store)  # now as failed
            self.amend(store)
            return
        if not uploaded:
            return
        status = self.synced.status
        assert status is not None
        try:
            self.events.fire(
                "state_synced",
                duration_ms=int((time.perf_counter() - t0) * 1000),
                metadata={"backend": status.backend, "location": status.location,
                          "generation": status.upload_generation, "previous_generation": status.generation},
            )
        except RockyError as exc:  # the state is uploaded; a hook cannot undo that
            self.log.warning(f"a state_synced hook failed: {exc}")

    # 7 ------------------------------------------------------------------------------------------------

    def settle(self, store: StateStore) -> None:
        """A SIGTERM that came while the run recorded, finalized or uploaded itself still stops it: the
        record is rewritten as interrupted (the exit code is 130)."""
        if self.outcome.settle_interrupt(self.guard.stop.is_set()):
            self.amend(store)

    # 8 ------------------------------------------------------------------------------------------------

    def report(self) -> RunOutput:
        """Say how the run ended: the interrupt line, ``pipeline_complete`` / ``pipeline_error``, and the
        Dagster Pipes report (a no-op outside Pipes); returns the run's output."""
        out = self.outcome.output
        assert out is not None, "report follows a run that returned"
        if out.interrupted:
            self.log.warning("run %s interrupted by %s; recorded as %s", self.outcome.run_id,
                             self.guard.signal_name or "signal", out.status)
        finish_run(self.events, out, on_abort=self._fail_after_report)
        from rocky_engine.run.pipes_report import report_to_pipes

        report_to_pipes(out)
        return out


    def _fail_after_report(self) -> None:
        """A ``pipeline_complete`` hook aborted the run after its store closed: open it again to rewrite
        the record (and close the key as failed, so a retry runs); a store that cannot take it is logged,
        the document on stdout still says what happened."""
        from rocky_engine.state.remote.sync import open_synced_store

        project = self.project
        try:
            self.synced = open_synced_store(
                project.state_path(), project.config.state, namespace=project.state_namespace,
                on_newer=self.on_newer,
            )
            with self.synced as store:
                self.amend(store)
                self.finalize(store)
                self.synced.upload()
        except RockyError as exc:
            self.log.error("could not record that run %s failed: %s", self.outcome.run_id, exc)


def _check_flags(name: str, pipeline_type: str, options: RunOptions) -> None:
    if options.filter and pipeline_type != "replication":
        # Ignored silently, a filter would rebuild everything the user meant to narrow down.
        also = " or use --model NAME to run one model" if pipeline_type == "transformation" else ""
        raise UsageError(
            f"--filter applies to replication pipelines; '{name}' is a {pipeline_type} pipeline",
            hint=f"drop --filter{also}",
        )
    if options.idempotency_key and (options.resume or options.resume_latest):
        raise UsageError(
            "--idempotency-key cannot be combined with --resume/--resume-latest",
            hint="drop one of them: a resume is a new attempt of a specific run, a key dedupes runs",
        )


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


def _event_sink(project: Project, run_id: str, pipeline: str, clock: Callable[[], datetime]) -> EventSink:
    """The run's hook dispatcher; without hooks (or hook warnings to log) the dispatcher is not even
    imported, which keeps ``subprocess`` and the hook machinery off the start-up path."""
    config = project.config
    if config.hook.empty and not any("[hook" in warning for warning in config.warnings):
        return NullEventSink()
    from rocky_engine.hooks.dispatcher import build_event_sink

    return build_event_sink(config, run_id, pipeline, clock=clock)
