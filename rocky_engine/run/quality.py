"""Quality runs: check existing tables and gate on error-severity failures (CONTRACT sections 1, 3).

Each ``[[tables]]`` entry names a table, or a whole schema (one ``information_schema`` listing per schema,
never one per table). Every table runs the pipeline's ``[checks]`` on its own session; results are written
to ``check_history`` in one batch. With ``fail_on_error`` (the default), a failed error-severity check, or
a table that could not be checked at all, sets ``check_gate_failed`` and makes the run a ``Failure``
(exit 1, not 2: seeds/running-without-an-orchestrator.md). Warnings are advisory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocky_engine.adapters.base import WarehouseAdapter, WarehouseSession
from rocky_engine.checks.history import all_records
from rocky_engine.checks.table_checks import CheckTarget, TableCheckOutcome, run_table_checks
from rocky_engine.config.pipelines import QualityPipeline
from rocky_engine.errors import AdapterError
from rocky_engine.run.dag_executor import TaskOutcome, run_dag
from rocky_engine.run.output import RunOutput, derive_status
from rocky_engine.state.runs import ModelExecution
from rocky_engine.wire.run import ExecutionSummary, TableError

if TYPE_CHECKING:
    from rocky_engine.run.context import RunContext

#: the freshness column when the pipeline sets no ``timestamp_column`` (the replication default); a table
#: without the column skips freshness
DEFAULT_TIMESTAMP_COLUMN = "_fivetran_synced"
DEFAULT_PARALLEL = 4


@dataclass(frozen=True)
class QualityTask:
    """One table to check, resolved from a ``[[tables]]`` entry."""

    catalog: str
    schema: str
    table: str
    columns: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.table}"


class QualityRunner:
    """Runs one quality pipeline."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.executions: list[ModelExecution] = []

    def run(self) -> RunOutput:
        from rocky_engine.adapters import open_adapter

        pipeline: QualityPipeline = self.ctx.pipeline
        adapter = open_adapter(self.ctx.config, pipeline.target.adapter, read_only=False)
        try:
            return self._run(adapter, pipeline)
        finally:
            adapter.close()

    # ------------------------------------------------------------------ planning

    def _resolve(
        self, adapter: WarehouseAdapter, pipeline: QualityPipeline, out: RunOutput
    ) -> list[QualityTask]:
        """Tables to check, in config order; unlistable schemas and missing tables go to ``errors``."""
        listings: dict[tuple[str, str], dict[str, list[str]] | AdapterError] = {}
        tasks: list[QualityTask] = []
        seen: set[str] = set()
        for entry in pipeline.tables:
            where = (entry.catalog, entry.schema_)
            if where not in listings:
                try:
                    listings[where] = _list_columns(adapter, entry.catalog, entry.schema_)
                except AdapterError as exc:
                    listings[where] = exc
            listing = listings[where]
            asset = [entry.catalog, entry.schema_] + ([entry.table] if entry.table else [])
            if isinstance(listing, AdapterError):
                out.errors.append(TableError(asset_key=asset, error=listing.message,
                                             failure_kind=listing.failure_kind))
                continue
            names = [entry.table] if entry.table else sorted(listing)
            if entry.table and entry.table not in listing:
                out.errors.append(TableError(
                    asset_key=asset, failure_kind="not-found",
                    error=f"table {entry.catalog}.{entry.schema_}.{entry.table} does not exist",
                ))
                continue
            if not names:
                out.errors.append(TableError(
                    asset_key=asset, failure_kind="not-found",
                    error=f"schema {entry.catalog}.{entry.schema_} has no tables to check",
                ))
                continue
            for name in names:
                task = QualityTask(entry.catalog, entry.schema_, name, tuple(listing[name]))
                if task.key not in seen:
                    seen.add(task.key)
                    tasks.append(task)
        return tasks

    # ------------------------------------------------------------------ execution

    def _run(self, adapter: WarehouseAdapter, pipeline: QualityPipeline) -> RunOutput:
        ctx = self.ctx
        out = RunOutput(pipeline_type="quality")
        tasks = self._resolve(adapter, pipeline, out)
        unchecked = len(out.errors)
        by_key = {t.key: t for t in tasks}
        configured = pipeline.execution.concurrency
        parallel = ctx.options.parallel or (configured if isinstance(configured, int) else DEFAULT_PARALLEL)
        parallel = max(1, min(parallel, len(tasks)))
        sessions: list[WarehouseSession] = [adapter] if parallel == 1 else [
            adapter.session() for _ in range(parallel)
        ]
        for session in sessions:
            ctx.guard.on_interrupt(session.interrupt)
        ts_column = pipeline.timestamp_column or DEFAULT_TIMESTAMP_COLUMN
        baseline = ctx.store.checks.row_count_baseline
        now = ctx.started_at
        ctx.events.fire("before_checks", metadata={"tables": len(tasks)})

        def task(key: str, session: WarehouseSession) -> TableCheckOutcome:
            t = by_key[key]
            target = CheckTarget(
                asset_key=[t.catalog, t.schema, t.table],
                table_key=t.key,
                qualified=adapter.qualified(t.schema, t.table, t.catalog),
                source_qualified=None,
                source_session=None,
                timestamp_column=ts_column if ts_column in t.columns else None,
                dialect=adapter.dialect,
            )
            return run_table_checks(session, pipeline.checks, target, baseline=baseline, now=now)

        outcomes: list[tuple[str, TableCheckOutcome]] = []

        def on_done(done: TaskOutcome[TableCheckOutcome]) -> None:
            self._record(done, by_key[done.name], out, outcomes)

        try:
            run_dag([t.key for t in tasks], {}, task, sessions, stop=ctx.guard.stop, on_done=on_done,
                    clock=ctx.clock)
        finally:
            if parallel > 1:
                for session in sessions:
                    session.close()
        # run_dag reports in completion order; the document lists tables in config order.
        order = {t.key: i for i, t in enumerate(tasks)}
        out.check_results.sort(key=lambda r: order.get(".".join(r.asset_key), 0))
        if pipeline.checks.freshness is not None and tasks and not any(ts_column in t.columns for t in tasks):
            ctx.log.warning(
                "freshness is configured but no checked table has the column '%s'; freshness skipped",
                ts_column,
            )
        ctx.store.checks.record_many(all_records(ctx.run_id, outcomes), now=ctx.clock())
        ctx.events.fire("after_checks", metadata={"tables": len(tasks), "failed": len(out.errors)})
        return self._finish(out, pipeline, outcomes, unchecked, parallel)

    def _record(
        self, done: TaskOutcome[TableCheckOutcome], task: QualityTask, out: RunOutput,
        outcomes: list[tuple[str, TableCheckOutcome]],
    ) -> None:
        ctx = self.ctx
        asset = [task.catalog, task.schema, task.table]
        status = "success"
        if done.ok and done.value is not None:
            outcome = done.value
            outcomes.append((task.key, outcome))
            out.check_results.append(outcome.result)
            out.anomalies.extend(outcome.anomalies)
            failed = outcome.failed()
            for check in failed:
                level = ctx.log.error if check.severity == "error" else ctx.log.warning
                level("check %s failed on %s%s", check.name, task.key,
                      f": {check.error}" if check.error else "")
            name = f"{task.schema}.{task.table}"
            ctx.stream.checks("table", name, asset, outcome.result.checks)
            ctx.events.fire("check_result", table=task.key, metadata=outcome.event_metadata())
            for anomaly in outcome.anomalies:
                ctx.stream.anomaly("table", name, asset, anomaly)
                ctx.events.fire("anomaly_detected", table=task.key, metadata=anomaly.wire())
            if outcome.error_failed():
                status = "failed"
            rows = outcome.row_count
        else:
            message = str(done.error)
            kind = done.error.failure_kind if isinstance(done.error, AdapterError) else "unknown"
            out.errors.append(TableError(asset_key=asset, error=message, failure_kind=kind))
            ctx.log.error("checking %s failed (%s): %s", task.key, kind, message)
            status, rows = "failed", None
        self.executions.append(ModelExecution(
            model_name=task.key, started_at=done.started_at, finished_at=ctx.clock(),
            duration_ms=done.duration_ms, rows_affected=rows, status=status,
        ))

    def _finish(
        self, out: RunOutput, pipeline: QualityPipeline, outcomes: list[tuple[str, TableCheckOutcome]],
        unchecked: int, parallel: int,
    ) -> RunOutput:
        ctx = self.ctx
        errored = len(out.errors)
        checked = len(outcomes)
        gate_checks = sum(1 for _, o in outcomes if o.error_failed())
        out.interrupted = ctx.guard.stop.is_set()
        out.tables_failed = errored
        out.execution = ExecutionSummary(
            concurrency=parallel, tables_processed=checked + errored - unchecked, tables_failed=errored
        )
        gate = pipeline.checks.fail_on_error and (gate_checks > 0 or errored > 0)
        out.check_gate_failed = gate
        if gate:
            out.status = "Failure"
            ctx.log.error(
                "quality gate failed: %d table(s) with a failed error-severity check, "
                "%d table(s) not checked",
                gate_checks, errored,
            )
        else:
            out.status = derive_status(checked, errored)
        return out


def _list_columns(adapter: WarehouseAdapter, catalog: str, schema: str) -> dict[str, list[str]]:
    """Every table and view of a schema with its columns, in one catalog query."""
    found = adapter.read_columns(catalog, [schema])
    return {table: [c.name for c in columns] for (_, table), columns in found.items()}
