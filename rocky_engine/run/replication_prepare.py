"""Prepare a replication run's copies: catalog reads, target schemas, drift decisions, copy specs.

Everything here happens once per run on the main thread: one column read of the source schemas and one
of the target schemas (a single read when both live in the same catalog), one schema listing per target
catalog, and the stored watermarks in one state query. Per table only dictionary lookups remain.
A table that cannot be prepared (its target catalog is not the adapter's, its schema is missing and may
not be created, it vanished since discovery) gets an error that its task raises, so it is contained and
reported like any failed copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocky_engine.adapters.base import Column, TableName
from rocky_engine.errors import AdapterError
from rocky_engine.replication.copy_sql import CopySpec
from rocky_engine.replication.drift import DriftDecision, decide
from rocky_engine.replication.ranges import resolve_reads
from rocky_engine.replication.table_plan import TablePlan

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.config.pipelines import ReplicationPipeline
    from rocky_engine.run.output import RunOutput


@dataclass
class PreparedTable:
    plan: TablePlan
    spec: CopySpec | None = None
    #: raised by the table's task instead of copying
    error: AdapterError | None = None
    drift: DriftDecision | None = None


@dataclass
class Prepared:
    tables: dict[str, PreparedTable] = field(default_factory=dict)
    tables_checked: int = 0
    tables_drifted: int = 0


def prepare(
    pipeline: ReplicationPipeline,
    plans: list[TablePlan],
    source: WarehouseAdapter,
    target: WarehouseAdapter,
    *,
    same_warehouse: bool,
    watermarks: dict[str, str],
    out: RunOutput,
) -> Prepared:
    """Build the copy spec of every planned table (creating missing target schemas on the way)."""
    source_catalog = pipeline.source.catalog or source.catalog
    result = Prepared()
    bad_catalog = {
        p.target_catalog for p in plans if p.target_catalog != target.catalog
    }
    schema_errors = _ensure_schemas(pipeline, plans, target, bad_catalog, out)
    source_schemas = {p.source_schema for p in plans}
    target_schemas = {p.target_schema for p in plans if p.target_catalog not in bad_catalog}
    if same_warehouse and source_catalog == target.catalog:
        both = source.read_columns(source_catalog, sorted(source_schemas | target_schemas))
        src_cols, tgt_cols = both, both
    else:
        src_cols = source.read_columns(source_catalog, sorted(source_schemas))
        tgt_cols = target.read_columns(target.catalog, sorted(target_schemas))
    metadata_names = [m.name for m in pipeline.metadata_columns]
    for plan in plans:
        prepared = PreparedTable(plan)
        result.tables[plan.key] = prepared
        if plan.target_catalog in bad_catalog:
            prepared.error = AdapterError(
                f"target catalog '{plan.target_catalog}' (catalog_template) is not the catalog of adapter "
                f"'{target.name}' ('{target.catalog}')",
                failure_kind="not-found",
                hint="make catalog_template render the target adapter's catalog (a DuckDB file's stem, a "
                "PostgreSQL database name)",
            )
            continue
        if plan.target_schema in schema_errors:
            prepared.error = schema_errors[plan.target_schema]
            continue
        columns = src_cols.get((plan.source_schema, plan.table))
        if not columns:
            prepared.error = AdapterError(
                f"source table {plan.label} does not exist any more (it was dropped after discovery)",
                failure_kind="not-found",
            )
            continue
        existing = tgt_cols.get((plan.target_schema, plan.table))
        target_rel = target.qualified(plan.target_schema, plan.table, plan.target_catalog)
        spec = CopySpec(
            strategy=pipeline.strategy,
            source_rel=source.qualified(plan.source_schema, plan.table, source_catalog),
            target=TableName(plan.target_catalog, plan.target_schema, plan.table, target_rel),
            columns=columns,
            dialect=target.dialect,
            metadata=pipeline.metadata_columns,
            timestamp_column=pipeline.timestamp_column,
            merge_keys=pipeline.merge_keys,
            watermark=watermarks.get(plan.key),
            target_exists=existing is not None,
            source_dialect=None if same_warehouse else source.dialect,
        )
        if not same_warehouse:
            estimate = next((t.row_count for t in plan.source.tables if t.name == plan.table), None)
            spec.parallel_reads = resolve_reads(pipeline.source.parallel_reads, estimate)
            spec.split_column = pipeline.source.split_column
            to = target.dialect
            spec.target_types = {
                c.name: to.render_type(to.column_type_from(c.data_type, source.dialect)) for c in columns
            }
        if existing is not None and pipeline.strategy != "full_refresh":
            result.tables_checked += 1
            drift = decide(columns, _without(existing, metadata_names), source_dialect=source.dialect,
                           target_dialect=target.dialect)
            if drift.drifted:
                result.tables_drifted += 1
                spec.drift = drift
                prepared.drift = drift
        prepared.spec = spec
    return result


def _without(columns: list[Column], names: list[str]) -> list[Column]:
    return [c for c in columns if c.name not in names] if names else columns


def _ensure_schemas(
    pipeline: ReplicationPipeline,
    plans: list[TablePlan],
    target: WarehouseAdapter,
    bad_catalog: set[str],
    out: RunOutput,
) -> dict[str, AdapterError]:
    """Create missing target schemas (``auto_create_schemas``); errors for the ones that cannot be."""
    needed = sorted({p.target_schema for p in plans if p.target_catalog not in bad_catalog})
    if not needed:
        return {}
    existing = set(target.list_schemas(target.catalog))
    errors: dict[str, AdapterError] = {}
    for schema in needed:
        if schema in existing:
            continue
        if not pipeline.target.governance.auto_create_schemas:
            errors[schema] = AdapterError(
                f"target schema '{target.catalog}.{schema}' does not exist",
                failure_kind="not-found",
                hint="create it, or set auto_create_schemas = true under [target.governance]",
            )
            continue
        try:
            target.ensure_schema(schema, target.catalog)
            out.permissions.schemas_created += 1
        except AdapterError as exc:
            errors[schema] = exc
    return errors
