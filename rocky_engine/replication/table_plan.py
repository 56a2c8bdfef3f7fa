"""Which tables a replication run copies, and where each lands.

From the discovered sources: drop ``excluded_tables`` (entries ``table`` or ``<source id>.table``, shell
globs allowed), apply ``--filter``, route each source through ``catalog_template`` / ``schema_template``.
A table's key is its target ``catalog.schema.table``: the watermark key and the resume (progress) key.
When source and target are the same warehouse, a source schema that is also a target schema of this
pipeline is skipped with a warning rather than copied into itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from rocky_engine.config.schema_pattern import Misfit, asset_key, render_template
from rocky_engine.errors import ConfigError
from rocky_engine.wire.discover import ExcludedTable

if TYPE_CHECKING:
    from rocky_engine.adapters.discovery import DiscoveredSource, DiscoverOutcome
    from rocky_engine.config.pipelines import ReplicationPipeline
    from rocky_engine.replication.filter import ReplicationFilter


@dataclass(frozen=True, slots=True)
class TablePlan:
    """One table to copy."""

    key: str
    source: DiscoveredSource
    table: str
    asset_key: tuple[str, ...]
    target_catalog: str
    target_schema: str

    @property
    def source_schema(self) -> str:
        return self.source.schema

    @property
    def label(self) -> str:
        """``source_schema.table`` as people name it in messages."""
        return f"{self.source.schema}.{self.table}"


@dataclass
class ReplicationPlan:
    tables: list[TablePlan] = field(default_factory=list)
    #: every table excluded by config
    excluded: list[ExcludedTable] = field(default_factory=list)
    #: schemas skipped with a reason the caller logs as a warning
    skipped: list[Misfit] = field(default_factory=list)


def excluded_by(patterns: list[str], source_id: str, table: str) -> str | None:
    """The ``excluded_tables`` pattern that names this table (by name or ``source_id.table``; globs
    allowed), or None."""
    qualified = f"{source_id}.{table}"
    return next((p for p in patterns if fnmatchcase(table, p) or fnmatchcase(qualified, p)), None)


def apply_exclusions(
    sources: list[DiscoveredSource], patterns: list[str]
) -> tuple[list[DiscoveredSource], list[ExcludedTable]]:
    """Sources without their excluded tables, and the excluded tables."""
    if not patterns:
        return sources, []
    from dataclasses import replace

    kept: list[DiscoveredSource] = []
    excluded: list[ExcludedTable] = []
    for source in sources:
        tables = []
        for table in source.tables:
            pattern = excluded_by(patterns, source.id, table.name)
            if pattern is not None:
                excluded.append(ExcludedTable(
                    asset_key=asset_key(source.source_type, source.components, table.name),
                    source_schema=source.schema, table_name=table.name,
                    reason=f"excluded_tables pattern '{pattern}'",
                ))
            else:
                tables.append(table)
        kept.append(replace(source, tables=tuple(tables)))
    return kept, excluded


def route(pipeline: ReplicationPipeline, source: DiscoveredSource) -> tuple[str, str]:
    """The target ``(catalog, schema)`` of a source."""
    target = pipeline.target
    catalog = render_template(target.catalog_template, source.components, target.separator,
                              key="target.catalog_template")
    schema = render_template(target.schema_template, source.components, target.separator,
                             key="target.schema_template")
    return catalog, schema


def plan_tables(
    pipeline: ReplicationPipeline,
    outcome: DiscoverOutcome,
    *,
    filt: ReplicationFilter | None,
    same_warehouse: bool,
) -> ReplicationPlan:
    """Every table the run copies, in a deterministic order (source id, then table).

    Raises:
        ConfigError: two source tables route to the same target table.
    """
    plan = ReplicationPlan(skipped=list(outcome.misfits))
    sources, plan.excluded = apply_exclusions(outcome.sources, pipeline.excluded_tables)
    routed = [(source, *route(pipeline, source)) for source in sources]
    target_schemas = {(catalog, schema) for _, catalog, schema in routed}
    source_catalog = pipeline.source.catalog
    owners: dict[str, str] = {}
    for source, catalog, schema in sorted(routed, key=lambda r: r[0].id):
        into_itself = source_catalog in (None, catalog) and (catalog, source.schema) in target_schemas
        if same_warehouse and into_itself:
            plan.skipped.append(
                Misfit(source.schema, f"schema '{source.schema}' is a target schema of this pipeline as well "
                       "as a source; skipped so it is not copied into itself (narrow the schema_pattern "
                       "prefix or change schema_template)")
            )
            continue
        if filt is not None and not filt.matches_source(source.id, source.components):
            continue
        for table in source.tables:
            if filt is not None and not filt.matches_table(table.name):
                continue
            key = f"{catalog}.{schema}.{table.name}"
            if key in owners:
                raise ConfigError(
                    f"source tables {owners[key]} and {source.id}.{table.name} both route to {key}",
                    key="target.schema_template",
                    hint="put a {component} placeholder in schema_template (or catalog_template) so every "
                    "source lands in its own schema",
                )
            owners[key] = f"{source.id}.{table.name}"
            plan.tables.append(
                TablePlan(
                    key=key,
                    source=source,
                    table=table.name,
                    asset_key=tuple(asset_key(source.source_type, source.components, table.name)),
                    target_catalog=catalog,
                    target_schema=schema,
                )
            )
    return plan
