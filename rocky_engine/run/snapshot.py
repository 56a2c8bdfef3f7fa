"""Snapshot runs: SCD-2 history of a source table into ``[target]`` (CONTRACT section 1).

The target holds every source column plus ``valid_from`` and ``valid_to`` (NULL: the current version).
The first run copies every source row as current. Later runs, in ONE transaction:

1. close the current version of every key whose source ``updated_at`` moved forward
   (``valid_to`` = the new ``updated_at``);
2. with ``invalidate_hard_deletes``, close the current version of every key gone from the source
   (``valid_to`` = the run's start time);
3. insert the source row of every key without a current version (new keys and the keys closed in 1),
   ``valid_from`` = its ``updated_at``.

A rerun with an unchanged source changes nothing. Statements are plain SQL (``UPDATE ... FROM``,
``NOT EXISTS``) that DuckDB and PostgreSQL both run; the DDL and the quoting are the dialect's. Source
and target must be on the same adapter: the statements join them. Checks configured on the pipeline run
on the target afterwards and are advisory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rocky_engine.adapters.base import WarehouseAdapter
from rocky_engine.checks.history import check_records
from rocky_engine.checks.sql import scalar, timestamp_literal
from rocky_engine.checks.table_checks import CheckTarget, run_table_checks
from rocky_engine.config.pipelines import SnapshotPipeline, TableRef
from rocky_engine.errors import AdapterError, ConfigError, RockyError
from rocky_engine.run.output import RunOutput
from rocky_engine.state.runs import ModelExecution
from rocky_engine.wire.run import ExecutionSummary, MaterializationInfo, MaterializationMetadata, TableError

if TYPE_CHECKING:
    from rocky_engine.run.context import RunContext

VALID_FROM = "valid_from"
VALID_TO = "valid_to"


@dataclass(frozen=True)
class SnapshotResult:
    created: bool
    inserted: int
    closed: int
    hard_deleted: int


class SnapshotRunner:
    """Runs one snapshot pipeline."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.executions: list[ModelExecution] = []

    def run(self) -> RunOutput:
        from rocky_engine.adapters import open_adapter

        pipeline: SnapshotPipeline = self.ctx.pipeline
        if pipeline.source.adapter != pipeline.target.adapter:
            raise ConfigError(
                f"snapshot source adapter '{pipeline.source.adapter}' differs from target adapter "
                f"'{pipeline.target.adapter}'",
                file=self.ctx.config.path,
                key=f"pipeline.{self.ctx.pipeline_name}.source.adapter",
                hint="a snapshot compares source and target in one statement: put both on the same adapter",
            )
        adapter = open_adapter(self.ctx.config, pipeline.target.adapter)
        self.ctx.guard.on_interrupt(adapter.interrupt)
        try:
            return self._run(adapter, pipeline)
        finally:
            adapter.close()

    def _run(self, adapter: WarehouseAdapter, pipeline: SnapshotPipeline) -> RunOutput:
        ctx = self.ctx
        out = RunOutput(pipeline_type="snapshot")
        tgt = pipeline.target
        asset = [tgt.catalog, tgt.schema_, tgt.table]
        qualified = adapter.qualified(tgt.schema_, tgt.table, tgt.catalog)
        started = ctx.clock()
        t0 = time.perf_counter()
        ctx.events.fire("before_materialize", table=tgt.full_name)
        try:
            result = apply_snapshot(adapter, pipeline, ctx.started_at)
        except RockyError as exc:
            duration = int((time.perf_counter() - t0) * 1000)
            kind = exc.failure_kind if isinstance(exc, AdapterError) else "query-rejected"
            out.errors.append(TableError(asset_key=asset, error=exc.message, failure_kind=kind))
            ctx.log.error("snapshot of %s failed (%s): %s", tgt.full_name, kind, exc.message)
            ctx.stream.failed("table", f"{tgt.schema_}.{tgt.table}", asset, exc.message, duration)
            ctx.events.fire("materialize_error", table=tgt.full_name, error=exc.message, duration_ms=duration)
            self._execution(tgt, started, duration, None, "failed")
            out.status = "Failure"
            out.tables_failed = 1
            out.execution = ExecutionSummary(concurrency=1, tables_processed=1, tables_failed=1)
            out.interrupted = ctx.guard.stop.is_set()
            return out
        duration = int((time.perf_counter() - t0) * 1000)
        ctx.log.info(
            "snapshot %s: %d version(s) inserted, %d closed%s", tgt.full_name, result.inserted, result.closed,
            " (target created)" if result.created else "",
        )
        out.materializations.append(MaterializationInfo(
            asset_key=asset,
            duration_ms=duration,
            rows_copied=result.inserted,
            started_at=started.isoformat().replace("+00:00", "Z"),
            metadata=MaterializationMetadata(
                strategy="snapshot",
                target_table_full_name=tgt.full_name,
                rows_inserted=result.inserted,
                rows_closed=result.closed,
                rows_hard_deleted=result.hard_deleted if pipeline.invalidate_hard_deletes else None,
            ),
        ))
        ctx.stream.materialized("table", f"{tgt.schema_}.{tgt.table}", out.materializations[-1])
        ctx.events.fire("after_materialize", table=tgt.full_name, duration_ms=duration,
                        metadata={"rows_inserted": result.inserted, "rows_closed": result.closed})
        self._execution(tgt, started, duration, result.inserted + result.closed, "success")
        out.tables_copied = 1
        out.execution = ExecutionSummary(concurrency=1, tables_processed=1, tables_failed=0)
        self._checks(adapter, pipeline, asset, qualified, out)
        out.status = "Success"
        out.interrupted = ctx.guard.stop.is_set()
        return out

    def _checks(
        self, adapter: WarehouseAdapter, pipeline: SnapshotPipeline, asset: list[str], qualified: str,
        out: RunOutput,
    ) -> None:
        """Run the configured checks on the target; advisory, as on replication runs."""
        ctx = self.ctx
        key = ".".join(asset)
        target = CheckTarget(
            asset_key=asset, table_key=key, qualified=qualified, source_qualified=None,
            source_session=None, timestamp_column=pipeline.updated_at, dialect=adapter.dialect,
        )
        outcome = run_table_checks(adapter, pipeline.checks, target,
                                   baseline=ctx.store.checks.row_count_baseline, now=ctx.started_at)
        if not outcome.result.checks:
            return
        out.check_results.append(outcome.result)
        out.anomalies.extend(outcome.anomalies)
        name = f"{asset[1]}.{asset[2]}"
        ctx.stream.checks("table", name, asset, outcome.result.checks)
        for anomaly in outcome.anomalies:
            ctx.stream.anomaly("table", name, asset, anomaly)
            ctx.events.fire("anomaly_detected", table=key, metadata=anomaly.wire())
        for check in outcome.failed():
            ctx.log.warning("check %s failed on %s (advisory on snapshot runs)", check.name, key)
        ctx.store.checks.record_many(check_records(ctx.run_id, key, outcome), now=ctx.clock())

    def _execution(
        self, tgt: TableRef, started: datetime, duration: int, rows: int | None, status: str
    ) -> None:
        self.executions.append(ModelExecution(
            model_name=tgt.full_name, started_at=started, finished_at=self.ctx.clock(),
            duration_ms=duration, rows_affected=rows, status=status,
        ))


def apply_snapshot(
    adapter: WarehouseAdapter, pipeline: SnapshotPipeline, run_time: datetime
) -> SnapshotResult:
    """Bring the SCD-2 target up to date with the source in one transaction.

    Raises:
        RockyError: the source is missing, lacks a configured column, has NULL or duplicate keys, or the
            target exists without ``valid_from`` / ``valid_to``.
        AdapterError: a statement failed (the transaction is rolled back).
    """
    src, tgt = pipeline.source, pipeline.target
    src_q = adapter.qualified(src.schema_, src.table, src.catalog)
    tgt_q = adapter.qualified(tgt.schema_, tgt.table, tgt.catalog)
    source_cols = adapter.describe(src.schema_, src.table, src.catalog)
    if not source_cols:
        raise AdapterError(f"snapshot source {src.full_name} does not exist", failure_kind="not-found",
                           hint="create it, or fix [source] catalog / schema / table")
    names = [c.name for c in source_cols]
    _require_columns(pipeline, names)
    _require_clean_keys(adapter, pipeline, src_q)
    target_cols = adapter.describe(tgt.schema_, tgt.table, tgt.catalog)
    dialect = adapter.dialect
    q = dialect.quote
    upd = q(pipeline.updated_at)
    with adapter.transaction():
        if not target_cols:
            adapter.ensure_schema(tgt.schema_, tgt.catalog)
            dialect.create_table_as(
                adapter, tgt_q,
                f"SELECT s.*, s.{upd} AS {q(VALID_FROM)}, "
                f"CASE WHEN FALSE THEN s.{upd} END AS {q(VALID_TO)} FROM {src_q} AS s",
            )
            inserted = int(scalar(adapter.query(f"SELECT COUNT(*) FROM {tgt_q}")) or 0)
            return SnapshotResult(created=True, inserted=inserted, closed=0, hard_deleted=0)
        existing = {c.name.lower() for c in target_cols}
        if not {VALID_FROM, VALID_TO} <= existing:
            raise RockyError(
                f"snapshot target {tgt.full_name} exists but has no {VALID_FROM} / {VALID_TO} columns",
                hint="point [target] at a new table (the snapshot creates it) or drop this one",
            )
        for col in source_cols:
            # New source columns join the history from now on; older versions read NULL there.
            if col.name.lower() not in existing:
                dialect.add_column(adapter, tgt_q, col.name, col.data_type)
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in pipeline.unique_key)
        current = f"t.{q(VALID_TO)} IS NULL"
        closed = adapter.execute(
            f"UPDATE {tgt_q} AS t SET {q(VALID_TO)} = s.{upd} FROM {src_q} AS s "
            f"WHERE {current} AND {on} AND s.{upd} > t.{upd}"
        ) or 0
        hard_deleted = 0
        if pipeline.invalidate_hard_deletes:
            hard_deleted = adapter.execute(
                f"UPDATE {tgt_q} AS t SET {q(VALID_TO)} = {timestamp_literal(run_time)} WHERE {current} "
                f"AND NOT EXISTS (SELECT 1 FROM {src_q} AS s WHERE {on})"
            ) or 0
        cols = ", ".join(q(n) for n in names)
        values = ", ".join(f"s.{q(n)}" for n in names)
        inserted = adapter.execute(
            f"INSERT INTO {tgt_q} ({cols}, {q(VALID_FROM)}, {q(VALID_TO)}) "
            f"SELECT {values}, s.{upd}, NULL FROM {src_q} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {tgt_q} AS t WHERE {current} AND {on})"
        ) or 0
    return SnapshotResult(
        created=False, inserted=inserted, closed=closed + hard_deleted, hard_deleted=hard_deleted
    )


def _require_columns(pipeline: SnapshotPipeline, names: list[str]) -> None:
    lowered = {n.lower() for n in names}
    missing = [c for c in [*pipeline.unique_key, pipeline.updated_at] if c.lower() not in lowered]
    if missing:
        raise RockyError(
            f"snapshot source {pipeline.source.full_name} has no column(s) {', '.join(missing)} "
            f"(columns: {', '.join(names)})",
            hint="fix unique_key / updated_at in the pipeline",
        )
    clash = [c for c in (VALID_FROM, VALID_TO) if c in lowered]
    if clash:
        raise RockyError(
            f"snapshot source {pipeline.source.full_name} already has column(s) {', '.join(clash)}, which "
            "the snapshot adds itself",
            hint="rename them in the source (or snapshot a view that renames them)",
        )


def _require_clean_keys(adapter: WarehouseAdapter, pipeline: SnapshotPipeline, src_q: str) -> None:
    """A key must identify one source row, or a run would insert several current versions of it."""
    keys = [adapter.quote(k) for k in pipeline.unique_key]
    any_null = " OR ".join(f"{k} IS NULL" for k in keys)
    group = ", ".join(keys)
    row = adapter.query(
        f"SELECT (SELECT COUNT(*) FROM {src_q} WHERE {any_null}), "
        f"(SELECT COUNT(*) FROM (SELECT 1 AS one FROM {src_q} GROUP BY {group} HAVING COUNT(*) > 1) AS d)"
    )[0]
    nulls, dups = int(row[0] or 0), int(row[1] or 0)
    key_text = ", ".join(pipeline.unique_key)
    if nulls:
        raise RockyError(
            f"snapshot source {pipeline.source.full_name} has {nulls} row(s) with a NULL unique_key "
            f"({key_text})",
            hint="filter them out in a view, or choose key columns that are never NULL",
        )
    if dups:
        raise RockyError(
            f"snapshot source {pipeline.source.full_name} has {dups} duplicate unique_key value(s) "
            f"({key_text}); a snapshot needs one row per key",
            hint="fix unique_key (add columns until it identifies a row) or deduplicate the source",
        )
