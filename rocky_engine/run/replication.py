"""Replication runs (CONTRACT section 3): discover source schemas, route, copy every table, contained.

One run: discover the sources (one catalog query), plan (exclusions, ``--filter``, routing, resume),
prepare (one column read per warehouse, drift decisions), then copy every table as its own task under
``[execution]`` (fixed or adaptive concurrency, ``table_retries``, ``fail_fast``,
``error_rate_abort_pct``). When source and target share a warehouse a copy is SQL only (one statement);
across warehouses rows stream through Arrow (``replication.copy_arrow``).

State (``run.replication_progress``): each finished table's progress row and, on success, its new
watermark are written in one transaction, batched every ``PROGRESS_FLUSH_SECONDS`` and at the end: a
run killed midway leaves the tables it finished resumable (``--resume``), and a table's watermark never
moves without its progress row. A failed table never advances its watermark. Inside one warehouse the
new watermarks (``MAX(ts)`` of each target, read after its copy) are read in batches on a background
thread, not one statement per table. A table copied but not yet flushed when the process died is copied
again on resume; the copy's guard (``ts > GREATEST(watermark, MAX(ts) of the target)``, or a full
rebuild when no watermark is known) keeps that from duplicating rows.

Checks: after a table is copied, ``[checks]`` run on it (when any is configured); with ``fail_on_error``
(the default) a failed error-severity check makes an otherwise successful run ``PartialFailure`` (exit 2,
``check_gate_failed: true``): the data has landed, the run is not clean (seeds/running-without-an-
orchestrator.md). Warning-severity failures are advisory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocky_engine.adapters.base import WarehouseAdapter, WarehouseSession
from rocky_engine.adapters.retry import RetriedAttempt
from rocky_engine.config.atomic_merges import refusal, replication_request
from rocky_engine.config.schema_pattern import SchemaPattern
from rocky_engine.errors import RockyError, UsageError
from rocky_engine.replication.copy_sql import CopyResult, copy_same_warehouse, tracks_watermark, validate_spec
from rocky_engine.replication.filter import ReplicationFilter
from rocky_engine.replication.table_plan import ReplicationPlan, TablePlan, plan_tables
from rocky_engine.run.attempts import attempt_trail, take_retried
from rocky_engine.run.concurrency import (
    ConcurrencyLimit,
    NotStarted,
    StopRules,
    TaskResult,
    cause_of,
    cooldown_of,
    failure_kind_of,
    run_tables,
)
from rocky_engine.run.events import count_rows_after
from rocky_engine.run.output import RunOutput, derive_status
from rocky_engine.run.progress_display import RunProgress
from rocky_engine.run.replication_prepare import Prepared, PreparedTable, prepare
from rocky_engine.run.replication_progress import ProgressBook
from rocky_engine.state.progress import FAILED, SUCCESS, ProgressEntry
from rocky_engine.state.runs import ModelExecution
from rocky_engine.wire.run import (
    AttemptInfo,
    DriftAction,
    ExecutionSummary,
    MaterializationInfo,
    MaterializationMetadata,
    TableError,
)

if TYPE_CHECKING:
    from rocky_engine.checks.table_checks import TableCheckOutcome
    from rocky_engine.config.checks import ChecksConfig
    from rocky_engine.config.pipelines import ReplicationPipeline
    from rocky_engine.replication.copy_sql import CopySpec
    from rocky_engine.run.context import RunContext

Worker = tuple[WarehouseSession, WarehouseSession]


@dataclass
class TableCopy:
    """What copying one table produced (returned by its task)."""

    result: CopyResult
    checks: TableCheckOutcome | None = None
    #: the watermark is read later, in a batch with other tables (``ProgressBook.copied``)
    deferred_mark: bool = False
    #: rows in the target after the copy, when known (``run.events``)
    row_count: int | None = None


class ReplicationRunner:
    """Runs one replication pipeline."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.executions: list[ModelExecution] = []
        self._book: ProgressBook | None = None
        #: table key -> the statement tries its sessions retried (``run.attempts``)
        self._retried: dict[str, list[RetriedAttempt]] = {}
        #: tables whose turn came as the run was stopped (``NotStarted``): reported with those not run
        self._stopped: set[str] = set()
        self._check_outcomes: list[tuple[str, TableCheckOutcome]] = []

    # ------------------------------------------------------------------ entry

    def run(self) -> RunOutput:
        ctx = self.ctx
        pipeline: ReplicationPipeline = ctx.pipeline
        if ctx.options.models:
            raise UsageError("--model applies to transformation pipelines", hint="use --filter table=<name>")
        pattern = SchemaPattern.from_config(pipeline.source.schema_pattern)
        filt = ReplicationFilter.parse(ctx.options.filter, pattern.names) if ctx.options.filter else None
        from rocky_engine.adapters import open_adapter
        from rocky_engine.adapters.registry import same_database

        # Source and target in one database: copies are SQL only.
        same = same_database(ctx.config, pipeline.source.adapter, pipeline.target.adapter)
        source = open_adapter(ctx.config, pipeline.source.adapter)
        try:
            target = source if same else open_adapter(ctx.config, pipeline.target.adapter)
            try:
                return self._run(pipeline, pattern, filt, source, target, same)
            except RockyError:
                # A signal that cancels a planning statement is still an interrupted run, not a failure
                # of the cancelled statement.
                if not ctx.guard.stop.is_set():
                    raise
                return RunOutput(pipeline_type="replication", status="Failure", interrupted=True)
            finally:
                if target is not source:
                    target.close()
        finally:
            source.close()

    def _run(
        self, pipeline: ReplicationPipeline, pattern: SchemaPattern, filt: ReplicationFilter | None,
        source: WarehouseAdapter, target: WarehouseAdapter, same: bool,
    ) -> RunOutput:
        ctx = self.ctx
        request = replication_request(ctx.pipeline_name, pipeline)
        if request is not None and not target.dialect.capabilities.merge:
            # Every table would merge into this target: the run is refused whole, before discovery, as a
            # recorded Failure naming the refusal (compile-error: nothing reached the warehouse).
            raise refusal(request, target.name, target.dialect.level_name, probed=True)
        out = RunOutput(pipeline_type="replication")
        plan = self._plan(pipeline, pattern, filt, source, same, out)
        tables = self._resume(plan.tables, out)
        if not tables:
            if not plan.tables:
                if filt is not None:
                    ctx.log.info("filter %s matched no table; nothing to do", filt)
                else:
                    ctx.log.info("no table to copy under the pattern %s; nothing to do", pattern.describe())
            else:
                ctx.log.info("every table was finished by %s; nothing to do", out.resumed_from)
            out.execution = ExecutionSummary(concurrency=0, tables_processed=0, tables_failed=0)
            return out
        watermarks = {w.key: w.value for w in ctx.store.watermarks.all()}
        prepared = prepare(pipeline, tables, source, target, same_warehouse=same, watermarks=watermarks,
                           out=out)
        out.drift.tables_checked = prepared.tables_checked
        out.drift.tables_drifted = prepared.tables_drifted
        for item in prepared.tables.values():
            if item.drift is not None and item.drift.drifted:
                ctx.events.fire("drift_detected", table=item.plan.key, metadata={
                    "actions": [{"action": s.action, "reason": s.reason} for s in item.drift.steps]})
        return self._execute(pipeline, prepared, [t.key for t in tables], source, target, same, out)

    # ------------------------------------------------------------------ planning

    def _plan(
        self, pipeline: ReplicationPipeline, pattern: SchemaPattern, filt: ReplicationFilter | None,
        source: WarehouseAdapter, same: bool, out: RunOutput,
    ) -> ReplicationPlan:
        from rocky_engine.adapters.discovery import open_discovery

        ctx = self.ctx
        discovery = open_discovery(ctx.config, pipeline, source_adapter=source)
        try:
            outcome = discovery.discover(pipeline, last_sync=False)  # a run never reads last_sync_at
        finally:
            discovery.close()
        for failed in outcome.failed_sources:
            ctx.log.warning("source %s could not be discovered (%s): %s", failed.id, failed.error_class,
                            failed.message)
        plan = plan_tables(pipeline, outcome, filt=filt, same_warehouse=same)
        for skipped in plan.skipped:
            ctx.log.warning("%s", skipped.reason)
        out.excluded_tables = plan.excluded
        ctx.events.fire("discover_complete", metadata={
            "sources": len(outcome.sources), "tables": len(plan.tables), "pattern": pattern.describe()})
        return plan

    def _resume(self, tables: list[TablePlan], out: RunOutput) -> list[TablePlan]:
        ctx = self.ctx
        if ctx.resumed_from is None:
            return tables
        done = [t for t in tables if t.key in ctx.completed_keys]
        out.resumed_from = ctx.resumed_from
        out.tables_skipped = len(done)
        if done:
            # Carried over, so resuming this run in turn skips them too.
            ctx.store.progress.record_many(
                ctx.run_id, [ProgressEntry(t.key, SUCCESS) for t in done], pipeline=ctx.pipeline_name,
                now=ctx.clock(),
            )
        ctx.log.info("resuming %s: %d table(s) already finished are skipped", ctx.resumed_from, len(done))
        return [t for t in tables if t.key not in ctx.completed_keys]

    # ------------------------------------------------------------------ execution

    def _execute(
        self, pipeline: ReplicationPipeline, prepared: Prepared, order: list[str],
        source: WarehouseAdapter, target: WarehouseAdapter, same: bool, out: RunOutput,
    ) -> RunOutput:
        ctx = self.ctx
        execution = pipeline.execution
        setting = ctx.options.parallel or execution.concurrency
        limit = ConcurrencyLimit(setting, tables=len(order))
        rules = StopRules(execution.table_retries, execution.fail_fast, execution.error_rate_abort_pct)
        checks = pipeline.checks if _checks_active(pipeline.checks) else None
        # The main session is idle while the workers copy: it reads the batched watermarks.
        book = self._book = ProgressBook(ctx, target if same else None)

        def new_worker() -> Worker:
            tgt = target.session()
            src = tgt if same else source.session()
            ctx.guard.on_interrupt(tgt.interrupt)
            if src is not tgt:
                ctx.guard.on_interrupt(src.interrupt)
            return src, tgt

        def task(key: str, worker: Worker) -> TableCopy:
            take_retried(set(worker))  # what the worker's sessions retried for another table is not ours
            try:
                return self._copy(prepared.tables[key], worker, same, checks)
            finally:
                # a table retry runs this again: its statement tries add up
                self._retried.setdefault(key, []).extend(take_retried(set(worker)))

        progress = RunProgress(len(order), ctx.pipeline_name)

        def on_done(outcome: TaskResult[TableCopy]) -> None:
            progress.advance(outcome.ok)
            self._record(outcome, prepared.tables[outcome.name], pipeline, out)

        def on_retry(key: str, error: BaseException, attempt: int) -> None:
            ctx.log.warning("table %s failed (%s), attempt %d of %d: %s", prepared.tables[key].plan.label,
                            failure_kind_of(error), attempt, rules.retries + 1, error)

        workers: list[Worker] = []
        try:
            run, workers = run_tables(order, task, new_worker, limit, rules, stop=ctx.guard.stop,
                                      on_done=on_done, on_retry=on_retry, maintenance=target.maintenance(),
                                      clock=ctx.clock)
        finally:
            progress.close()
            try:
                book.flush(force=True)
            finally:
                book.close()
                for src, tgt in workers:
                    tgt.close()
                    if src is not tgt:
                        src.close()
        self._record_checks()
        out.interrupted = ctx.guard.stop.is_set()
        not_run = [k for k in order if k in self._stopped or k in run.not_run]
        if not_run:
            reason = run.stop_reason or "the run was interrupted"
            if run.stop_reason:
                ctx.log.error("stopped scheduling: %s; %d table(s) not run", reason, len(not_run))
            # in the record too: `rocky history` and `rocky brief` name every table the run left stale
            gave_up, status = ctx.clock(), "interrupted" if out.interrupted else "not_run"
            for key in not_run:
                out.errors.append(TableError(asset_key=list(prepared.tables[key].plan.asset_key),
                                             error=f"not run: {reason}", failure_kind="unknown"))
                self.executions.append(ModelExecution(model_name=prepared.tables[key].plan.key,
                                                      started_at=gave_up, status=status))
        return self._finish(pipeline, out, limit.peak, len(not_run))

    def _copy(
        self, item: PreparedTable, worker: Worker, same: bool, checks: ChecksConfig | None
    ) -> TableCopy:
        ctx = self.ctx
        if item.error is not None:
            raise item.error
        spec = item.spec
        assert spec is not None
        src, tgt = worker
        ctx.events.fire("before_materialize", table=item.plan.key)
        if ctx.guard.stop.is_set():  # the signal came during the hooks: nothing of this table is sent
            raise NotStarted(item.plan.key)
        validate_spec(spec, item.plan.label)
        deferred = same and tracks_watermark(spec)
        if same:
            result = copy_same_warehouse(tgt, spec, read_mark=not deferred)
        else:
            from rocky_engine.replication.copy_arrow import copy_across

            result = copy_across(src, tgt, spec)
        copy = TableCopy(result, deferred_mark=deferred)
        if checks is not None:
            copy.checks = self._check(item, spec, src, tgt, same, checks)
        # The rows in the target after the copy, for the event: row_count counted them already, a full
        # refresh holds exactly what it copied, else one COUNT(*) (only when the event has a reader).
        if copy.checks is not None and copy.checks.row_count is not None:
            copy.row_count = copy.checks.row_count
        elif self.ctx.pipeline.strategy == "full_refresh":
            copy.row_count = result.rows
        else:
            copy.row_count = count_rows_after(ctx.stream, tgt, spec.target_rel)
        return copy

    def _check(
        self, item: PreparedTable, spec: CopySpec, src: WarehouseSession, tgt: WarehouseSession, same: bool,
        checks: ChecksConfig,
    ) -> TableCheckOutcome:
        from rocky_engine.checks.table_checks import CheckTarget, run_table_checks

        pipeline: ReplicationPipeline = self.ctx.pipeline
        has_ts = pipeline.timestamp_column in {c.name for c in spec.columns}
        # Checks run per table, right after its copy, so the check events are per table too.
        self.ctx.events.fire("before_checks", table=item.plan.key)
        outcome = run_table_checks(
            tgt,
            checks,
            CheckTarget(
                asset_key=list(item.plan.asset_key),
                table_key=item.plan.key,
                qualified=spec.target_rel,
                source_qualified=spec.source_rel,
                source_session=None if same else src,
                timestamp_column=pipeline.timestamp_column if has_ts else None,
                ignore_columns=[m.name for m in pipeline.metadata_columns],
                dialect=spec.dialect,
            ),
            baseline=self.ctx.store.checks.row_count_baseline,
            now=self.ctx.clock(),
        )
        self.ctx.events.fire("after_checks", table=item.plan.key,
                             metadata={"failed": len(outcome.failed())})
        return outcome

    # ------------------------------------------------------------------ bookkeeping

    def _record(
        self, outcome: TaskResult[TableCopy], item: PreparedTable, pipeline: ReplicationPipeline,
        out: RunOutput,
    ) -> None:
        ctx = self.ctx
        book = self._book
        assert book is not None
        plan = item.plan
        finished = ctx.clock()
        rows: int | None = None
        retried = self._retried.pop(outcome.name, []) + outcome.retried
        if isinstance(outcome.error, NotStarted):
            self._stopped.add(outcome.name)
            return
        trail: list[AttemptInfo] = []
        if outcome.ok and outcome.value is not None:
            trail = attempt_trail(retried, outcome.duration_ms)
            copied = outcome.value
            rows = copied.result.rows
            watermark = copied.result.watermark
            spec = item.spec
            meta = MaterializationMetadata(
                strategy=pipeline.strategy,
                watermark=watermark,
                target_table_full_name=plan.key,
                column_count=(len(spec.columns) + len(pipeline.metadata_columns)) if spec else None,
            )
            out.materializations.append(
                MaterializationInfo(
                    asset_key=list(plan.asset_key),
                    duration_ms=outcome.duration_ms,
                    rows_copied=rows,
                    started_at=outcome.started_at.isoformat().replace("+00:00", "Z"),
                    metadata=meta,
                    attempts=trail,
                )
            )
            name, asset_key = f"{plan.target_schema}.{plan.table}", list(plan.asset_key)
            # drift was handled before the copy: its events come first, so the materialization carries it
            if item.drift is not None:
                for step in item.drift.steps:
                    out.drift.actions_taken.append(DriftAction(asset_key=asset_key, table=plan.key,
                                                               action=step.action, reason=step.reason))
                    ctx.stream.drift("table", name, asset_key, step.action, step.reason, list(step.columns))
            mat, checked = out.materializations[-1], copied.checks

            def stream_events() -> None:
                ctx.stream.materialized("table", name, mat, copied.row_count)
                if checked is not None:
                    ctx.stream.checks("table", name, asset_key, checked.result.checks)
                    for anomaly in checked.anomalies:
                        ctx.stream.anomaly("table", name, asset_key, anomaly)

            if checked is not None:
                out.check_results.append(checked.result)
                out.anomalies.extend(checked.anomalies)
                self._check_outcomes.append((plan.key, checked))
                ctx.events.fire("check_result", table=plan.key, metadata=checked.event_metadata())
                for anomaly in checked.anomalies:
                    ctx.events.fire("anomaly_detected", table=plan.key, metadata=anomaly.wire())
            entry = ProgressEntry(plan.key, SUCCESS, rows, finished_at=finished)
            if copied.deferred_mark and spec is not None:
                # the watermark is read in a batch: the table's events wait for it (ProgressBook)
                book.copied(entry, spec, meta, then=stream_events if ctx.stream.active else None)
            else:
                book.finished(entry, watermark)
                stream_events()
            status = "success"
            ctx.events.fire("after_materialize", table=plan.key, duration_ms=outcome.duration_ms,
                            metadata={"rows_copied": rows, "strategy": pipeline.strategy})
        else:
            error = outcome.error
            kind = failure_kind_of(error)
            message = _message(error)
            if ctx.guard.stop.is_set():
                message = f"interrupted: {message}"
            trail = attempt_trail(retried, outcome.duration_ms, message)
            out.errors.append(TableError(asset_key=list(plan.asset_key), error=message, failure_kind=kind,
                                         cooldown_seconds=cooldown_of(error), cause=cause_of(error)))
            ctx.log.error("table %s -> %s failed (%s): %s", plan.label, plan.key, kind, message)
            ctx.stream.failed("table", f"{plan.target_schema}.{plan.table}", list(plan.asset_key), message,
                              outcome.duration_ms)
            book.finished(ProgressEntry(plan.key, FAILED, error=message, finished_at=finished))
            status = "failed"
            ctx.events.fire("materialize_error", table=plan.key, error=message,
                            duration_ms=outcome.duration_ms)
        self.executions.append(
            ModelExecution(model_name=plan.key, started_at=outcome.started_at, finished_at=finished,
                           duration_ms=outcome.duration_ms, rows_affected=rows, status=status,
                           attempts=[a.wire() for a in trail] or None)
        )
        book.flush()

    def _record_checks(self) -> None:
        if not self._check_outcomes:
            return
        from rocky_engine.checks.history import all_records

        self.ctx.store.checks.record_many(
            all_records(self.ctx.run_id, self._check_outcomes), now=self.ctx.clock()
        )

    def _finish(
        self, pipeline: ReplicationPipeline, out: RunOutput, concurrency: int, not_run: int
    ) -> RunOutput:
        failed = len(out.errors) - not_run
        succeeded = len(out.materializations)
        out.tables_copied = succeeded
        out.tables_failed = failed
        out.execution = ExecutionSummary(concurrency=concurrency, tables_processed=succeeded + failed,
                                         tables_failed=failed)
        out.status = derive_status(succeeded, failed + not_run)
        gate = [key for key, o in self._check_outcomes if o.error_failed()]
        if gate and pipeline.checks.fail_on_error:
            out.check_gate_failed = True
            if out.status == "Success":
                out.status = "PartialFailure"
            self.ctx.log.error("check gate: an error-severity check failed on %d copied table(s): %s",
                               len(gate), ", ".join(gate[:5]))
        return out


def _checks_active(checks: ChecksConfig) -> bool:
    return checks.enabled and bool(
        checks.row_count or checks.column_match.enabled or checks.freshness or checks.null_rate
        or checks.custom or checks.assertions
    )


def _message(error: BaseException | None) -> str:
    if isinstance(error, RockyError):
        return str(error)
    if error is None:
        return "unknown error"
    return f"{type(error).__name__}: {error}"

