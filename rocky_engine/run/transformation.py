"""Transformation runs: execute the model DAG with per-model containment (CONTRACT sections 2, 3).

Planning does one catalog read for the whole run (never a listing per model); execution spends one
statement per full-refresh model on its own cursor; state-store writes are batched at the end. The
pipeline's ``[checks]``, when any, run after the DAG on the models built as tables
(``run.transformation_checks``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from rocky_engine.adapters.base import TableName, WarehouseAdapter, WarehouseSession
from rocky_engine.adapters.retry import RetriedAttempt
from rocky_engine.config.atomic_merges import refusal
from rocky_engine.errors import AdapterError, CapabilityRefused, ConfigError, ModelError, RockyError
from rocky_engine.models.dag import ModelSet
from rocky_engine.run.attempts import attempt_trail, take_retried
from rocky_engine.run.compile import compile_model
from rocky_engine.run.concurrency import NotStarted, cause_of, cooldown_of
from rocky_engine.run.dag_executor import TaskOutcome, run_dag
from rocky_engine.run.events import count_rows_after
from rocky_engine.run.materialize import Materialized, materialize
from rocky_engine.run.output import RunOutput, derive_status
from rocky_engine.run.progress_display import RunProgress
from rocky_engine.run.selection import select_models
from rocky_engine.state.runs import ModelExecution
from rocky_engine.wire.run import (
    ContainedInfo,
    ExecutionSummary,
    MaterializationInfo,
    MaterializationMetadata,
    TableError,
)

if TYPE_CHECKING:
    from rocky_engine.run.context import RunContext

DEFAULT_PARALLEL = 4
#: strategies that add to a table: the rows in it after a run are counted for the event, when one listens
_APPENDING = frozenset({"incremental", "merge", "delete_insert"})


class TransformationRunner:
    """Runs one transformation pipeline."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.executions: list[ModelExecution] = []
        #: model -> the statement tries the adapter retried while building it (``run.attempts``)
        self._retried: dict[str, list[RetriedAttempt]] = {}
        #: models whose turn came as the run was stopped (``NotStarted``): reported as not started
        self._stopped: set[str] = set()

    def run(self) -> RunOutput:
        ctx = self.ctx
        model_set = ctx.project.load_models(ctx.pipeline_name)
        selected = self._select(model_set)
        from rocky_engine.adapters import open_adapter

        adapter = open_adapter(ctx.config, ctx.pipeline.target.adapter)
        try:
            return self._run(adapter, model_set, selected)
        except RockyError:
            # A signal that cancels a planning statement (schema creation, the catalog read) is still an
            # interrupted run: report and record it as one instead of failing with the cancelled statement.
            if not ctx.guard.stop.is_set():
                raise
            return RunOutput(pipeline_type="transformation", status="Failure", interrupted=True)
        finally:
            adapter.close()

    def _select(self, model_set: ModelSet) -> list[str]:
        return select_models(model_set, self.ctx.options.models, self.ctx.pipeline_name)

    def _concurrency(self) -> int:
        """``--parallel``, else the pipeline's ``[execution] concurrency`` (``"adaptive"`` starts at 4)."""
        if self.ctx.options.parallel is not None:
            return max(1, self.ctx.options.parallel)
        configured = getattr(getattr(self.ctx.pipeline, "execution", None), "concurrency", None)
        return configured if isinstance(configured, int) and configured > 0 else DEFAULT_PARALLEL

    def _resolve_targets(self, adapter: WarehouseAdapter, model_set: ModelSet) -> dict[str, TableName]:
        default_schema = adapter.default_schema
        targets: dict[str, TableName] = {}
        for name, model in model_set.models.items():
            catalog = model.target.catalog or adapter.catalog
            schema = model.target.schema or default_schema
            table = model.target.table or name
            targets[name] = TableName(catalog, schema, table, adapter.qualified(schema, table, catalog))
        # Two models writing one relation would silently overwrite each other, in whichever order they ran.
        owners: dict[str, str] = {}
        for name in sorted(targets):
            if model_set.models[name].strategy.type == "ephemeral":
                continue
            key = targets[name].full_name.lower()
            if key in owners:
                raise ModelError(
                    f"models '{owners[key]}' and '{name}' both write {targets[name].full_name}",
                    hint="give one of them its own [target] table or schema in its sidecar",
                )
            owners[key] = name
        return targets

    def _prepare_schemas(
        self, adapter: WarehouseAdapter, model_set: ModelSet, selected: list[str],
        targets: dict[str, TableName], out: RunOutput,
    ) -> None:
        governance = getattr(self.ctx.pipeline.target, "governance", None)
        auto_create = bool(getattr(governance, "auto_create_schemas", True))
        needed = sorted(
            {(targets[n].catalog, targets[n].schema) for n in selected
             if model_set.models[n].strategy.type != "ephemeral"}
        )
        for catalog, schema in needed:
            if catalog != adapter.catalog:
                owner = next(n for n in selected if targets[n].catalog == catalog)
                # a refusal of the project as configured (no run record), not a failed run
                raise ConfigError(
                    f"model '{owner}' targets catalog '{catalog}', but adapter '{adapter.name}' is catalog "
                    f"'{adapter.catalog}'",
                    hint="fix [target] catalog in the model sidecar or models/_defaults.toml",
                )
            if schema in adapter.list_schemas(catalog):
                continue
            if not auto_create:
                owner = next(n for n in selected if targets[n].schema == schema)
                raise ConfigError(
                    f"target schema '{catalog}.{schema}' of model '{owner}' does not exist",
                    hint="create it, or set auto_create_schemas = true under the pipeline's "
                    "[target.governance]",
                )
            adapter.ensure_schema(schema, catalog)
            out.permissions.schemas_created += 1

    def _refused(
        self, adapter: WarehouseAdapter, model_set: ModelSet, selected: list[str]
    ) -> dict[str, CapabilityRefused]:
        """The selected models whose atomic merge the server's capability level cannot do (no MERGE), with
        the refusal: each fails before anything of it is written, the others run."""
        if adapter.dialect.capabilities.merge:
            return {}
        pipeline_atomic = bool(getattr(self.ctx.pipeline, "atomic_merges", False))
        refused: dict[str, CapabilityRefused] = {}
        for name in selected:
            strategy = model_set.models[name].strategy
            request = strategy.atomic_request(self.ctx.pipeline_name, name, pipeline_atomic)
            if request is not None:
                refused[name] = refusal(request, adapter.name, adapter.dialect.level_name, probed=True)
        return refused

    def _run(self, adapter: WarehouseAdapter, model_set: ModelSet, selected: list[str]) -> RunOutput:
        ctx = self.ctx
        out = RunOutput(pipeline_type="transformation")
        targets = self._resolve_targets(adapter, model_set)
        refused = self._refused(adapter, model_set, selected)
        # a refused model writes nothing, not even the schema it would land in
        self._prepare_schemas(adapter, model_set, [n for n in selected if n not in refused], targets, out)
        existing = {(r.schema, r.name): r.kind for r in adapter.list_relations(adapter.catalog)}
        runnable = [n for n in selected if model_set.models[n].strategy.type != "ephemeral"]
        parallel = min(self._concurrency(), max(1, len(runnable)))
        ctx.log.info(
            "run %s: pipeline %s, %d model(s) to build, concurrency %d",
            ctx.run_id, ctx.pipeline_name, len(runnable), parallel,
        )
        compiled = self._compile(runnable, model_set, targets, adapter.quote)
        sessions: list[WarehouseSession] = [adapter] if parallel == 1 else [
            adapter.session() for _ in range(parallel)
        ]
        for session in sessions:
            ctx.guard.on_interrupt(session.interrupt)
        dialect = adapter.dialect
        deps = {n: model_set.models[n].depends_on for n in runnable}
        # Ephemeral models are inlined: a runnable model waits on the real models behind them.
        for name in runnable:
            deps[name] = model_set.built_upstream(name)

        def task(name: str, session: WarehouseSession) -> Materialized:
            model = model_set.models[name]
            target = targets[name]
            ctx.events.fire("before_model_run", model=name, table=target.full_name)
            if ctx.guard.stop.is_set():  # the signal came during the hooks: nothing of this model is sent
                raise NotStarted(name)
            select = compiled[name]
            if isinstance(select, ModelError):
                raise _CompileError(str(select)) from select
            if name in refused:
                raise refused[name]  # CapabilityRefused: compile-error, nothing was issued
            take_retried([session])  # what the session retried before (planning, another model) is not ours
            try:
                built = materialize(
                    session, dialect, model.strategy, target, select,
                    exists_as=existing.get((target.schema, target.table)),
                )
                if model.strategy.type == "full_refresh":  # a rebuild holds exactly the rows it wrote
                    return replace(built, row_count=built.rows)
                if model.strategy.type in _APPENDING:  # rows written are not the rows in the table
                    return replace(built, row_count=count_rows_after(ctx.stream, session, target.qualified))
                return built
            finally:
                self._retried[name] = take_retried([session])

        progress = RunProgress(len(runnable), f"{ctx.pipeline_name}")

        def on_done(outcome: TaskOutcome[Materialized]) -> None:
            progress.advance(outcome.ok)
            self._record(outcome, model_set, targets, out)

        try:
            result = run_dag(
                runnable, deps, task, sessions, stop=ctx.guard.stop, on_done=on_done,
                maintenance=adapter.maintenance(), clock=ctx.clock,
            )
        finally:
            progress.close()
            if parallel > 1:
                for session in sessions:
                    session.close()
        # The hint names the pipeline always: the command must run as pasted, and `rocky run --model M`
        # alone is refused in a project of several pipelines (or once a second one is added).
        rerun = f"rocky run --pipeline {shlex.quote(ctx.pipeline_name)} --model"
        for name, blockers in sorted(result.blocked.items()):
            out.contained.append(
                ContainedInfo(
                    model=name,
                    blocked_by=blockers,
                    unblock_hint=f"fix {', '.join(blockers)} and run again (or `{rerun} {shlex.quote(name)}` "
                    "once the upstream is rebuilt)",
                )
            )
        out.interrupted = ctx.guard.stop.is_set()
        failed = len(out.errors)
        succeeded = len(out.materializations)
        stopped = [n for n in runnable if n in self._stopped or n in result.not_started]
        problems = failed + len(out.contained) + (len(stopped) if out.interrupted else 0)
        out.tables_copied = succeeded
        out.tables_failed = failed
        out.execution = ExecutionSummary(
            concurrency=parallel, tables_processed=succeeded + failed, tables_failed=failed
        )
        out.status = derive_status(succeeded, problems)
        self._record_unbuilt(result.blocked, stopped, model_set, targets, out)
        watermarks = {
            ".".join(m.asset_key): m.metadata.watermark
            for m in out.materializations
            if m.metadata.watermark is not None
        }
        if watermarks:
            ctx.store.watermarks.set_many(watermarks, now=ctx.clock())
        from rocky_engine.run.transformation_checks import checks_active

        if checks_active(ctx.pipeline.checks) and out.materializations and not out.interrupted:
            self._check(adapter, model_set, targets, out)
        return out

    def _record_unbuilt(
        self, blocked: dict[str, list[str]], not_started: list[str], model_set: ModelSet,
        targets: dict[str, TableName], out: RunOutput,
    ) -> None:
        """The models the run never built are in its record too (status ``contained`` or ``interrupted``),
        and one it never started is an error of the document, as in a replication run: the exit code,
        ``errors[]`` and ``rocky history`` / ``rocky brief`` then name every model that is now stale."""
        gave_up = self.ctx.clock()  # a model that never ran has no start of its own: when the run gave up
        status = "interrupted" if out.interrupted else "not_run"
        for name in not_started:
            out.errors.append(TableError(asset_key=targets[name].asset_key,
                                         error="not run: the run was interrupted", failure_kind="unknown"))
        unbuilt = [*((n, "contained") for n in sorted(blocked)), *((n, status) for n in not_started)]
        for name, state in unbuilt:
            self.executions.append(ModelExecution(model_name=name, started_at=gave_up, status=state,
                                                  sql_hash=model_set.models[name].sql_hash))

    def _compile(
        self, runnable: list[str], model_set: ModelSet, targets: dict[str, TableName],
        quote: Callable[[str], str],
    ) -> dict[str, str | ModelError]:
        """Compile every model up front, then fire ``compile_complete`` (an abort there builds nothing).

        A model that does not compile keeps its error; it fails as ``compile-error`` when its turn comes,
        so its downstream models are contained and the rest of the DAG still runs.
        """
        compiled: dict[str, str | ModelError] = {}
        for name in runnable:
            try:
                compiled[name] = compile_model(name, model_set, targets, self.ctx.options.variables, quote)
            except ModelError as exc:
                compiled[name] = exc
        failed = sorted(n for n, select in compiled.items() if isinstance(select, ModelError))
        self.ctx.events.fire("compile_complete", metadata={
            "models": len(runnable), "compiled": len(runnable) - len(failed), "failed": failed})
        return compiled

    def _check(
        self, adapter: WarehouseAdapter, model_set: ModelSet, targets: dict[str, TableName],
        out: RunOutput,
    ) -> None:
        """Run ``[checks]`` on every model this run built as a table (views and ephemerals hold no data)."""
        from rocky_engine.run.transformation_checks import CheckedModel, run_model_checks

        built = {m.metadata.target_table_full_name for m in out.materializations}
        models = [
            CheckedModel(name, targets[name], model_set.models[name].strategy.timestamp_column)
            for name in model_set.order
            if targets[name].full_name in built
            and model_set.models[name].strategy.type not in ("view", "ephemeral")
        ]
        run_model_checks(self.ctx, adapter, models, out)

    def _record(
        self, outcome: TaskOutcome[Materialized], model_set: ModelSet,
        targets: dict[str, TableName], out: RunOutput,
    ) -> None:
        name = outcome.name
        target = targets[name]
        model = model_set.models[name]
        finished = self.ctx.clock()
        ctx = self.ctx
        retried = self._retried.pop(name, [])
        if isinstance(outcome.error, NotStarted):
            self._stopped.add(name)
            return
        if outcome.ok and outcome.value is not None:
            trail = attempt_trail(retried, outcome.duration_ms)
            out.materializations.append(
                MaterializationInfo(
                    asset_key=target.asset_key,
                    duration_ms=outcome.duration_ms,
                    rows_copied=outcome.value.rows,
                    started_at=outcome.started_at.isoformat().replace("+00:00", "Z"),
                    metadata=MaterializationMetadata(
                        strategy=model.strategy.type,
                        watermark=outcome.value.watermark,
                        target_table_full_name=target.full_name,
                        sql_hash=model.sql_hash,
                    ),
                    attempts=trail,
                )
            )
            status = "success"
            ctx.stream.materialized("model", name, out.materializations[-1], outcome.value.row_count)
            ctx.events.fire("after_model_run", model=name, table=target.full_name,
                            duration_ms=outcome.duration_ms)
        else:
            error = outcome.error
            kind = _failure_kind(error)
            message = str(error)
            if ctx.guard.stop.is_set() and kind != "compile-error":
                message = f"interrupted: {message}"
            trail = attempt_trail(retried, outcome.duration_ms, message)
            out.errors.append(TableError(asset_key=target.asset_key, error=message, failure_kind=kind,
                                         cooldown_seconds=cooldown_of(error), cause=cause_of(error)))
            ctx.log.error("model %s failed (%s): %s", name, kind, message)
            status = "failed"
            ctx.stream.failed("model", name, target.asset_key, message, outcome.duration_ms)
            ctx.events.fire("model_error", model=name, table=target.full_name, error=message,
                            duration_ms=outcome.duration_ms)
        self.executions.append(
            ModelExecution(
                model_name=name,
                started_at=outcome.started_at,
                finished_at=finished,
                duration_ms=outcome.duration_ms,
                rows_affected=outcome.value.rows if outcome.value is not None else None,
                status=status,
                sql_hash=model.sql_hash,
                attempts=[a.wire() for a in trail] or None,
            )
        )


class _CompileError(Exception):
    """A model that could not be compiled (failure_kind ``compile-error``)."""


def _failure_kind(error: BaseException | None) -> str:
    if isinstance(error, _CompileError):
        return "compile-error"
    if isinstance(error, AdapterError):
        return error.failure_kind
    return "unknown"
