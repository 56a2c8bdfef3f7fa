"""Discovered tables as Dagster assets: ``load_rocky_assets`` (specs) and the multi-asset factory.

``load_rocky_assets`` returns one ``AssetSpec`` per discovered table (and, from ``rocky dag``, one per
model: :mod:`dagster_rocky.models`). ``build_rocky_assets`` returns one subset-aware ``multi_asset`` per
group that executes ``rocky run --filter`` for the selected tables and reports one ``MaterializeResult``
per materialized table and one ``AssetCheckResult`` per check the run evaluated.

Check specs are declared only for the checks the project configures: ``rocky dag`` lists them per
replicated table (row_count, column_match, freshness, null_rate, custom checks, assertions, and the
anomaly detector as ``row_count_anomaly``). Given only a discover document, the freshness check (the one
discover reports) is all that is known, so it is all that is declared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import dagster as dg

from dagster_rocky.resource import RockyResource
from dagster_rocky.tenancy import strip_tenant, tenant_of
from dagster_rocky.translator import RockyDagsterTranslator, component_value, safe_name
from dagster_rocky.types import DagNode, DagResult, DiscoverChecks, DiscoverResult, SourceInfo, TableInfo

F = TypeVar("F", bound=Callable[..., Any])

#: the Dagster concurrency pool every Rocky asset step runs in unless told otherwise: one project's steps
#: write one state store, so an instance limit of 1 on this pool makes them take turns
DEFAULT_POOL = "rocky"

FRESHNESS_CHECK = "freshness"
#: the name of the anomaly detector's check (the engine's kind ``anomaly``)
ANOMALY_CHECK = "row_count_anomaly"

_CHECK_DESCRIPTIONS = {
    "row_count": "Rocky: the target has as many rows as the source",
    "column_match": "Rocky: the target has the source's columns",
    "freshness": "Rocky: the newest row is within the freshness threshold",
    "null_rate": "Rocky: the column's share of NULLs is within the threshold",
    "anomaly": "Rocky: the row count is near its recent baseline (advisory)",
    "custom": "Rocky: a custom SQL check",
}


def _own(node: DagNode, pipeline: str | None) -> bool:
    return pipeline is None or pipeline == node.pipeline


def _describe(kind: str, column: str | None, assertion: bool) -> str:
    on = f" on {column}" if column else ""
    if assertion:
        return f"Rocky assertion: {kind}{on}"
    return _CHECK_DESCRIPTIONS.get(kind, f"Rocky check ({kind})") + on


def node_checks(node: DagNode) -> dict[str, str]:
    """The checks the node's own pipeline evaluates on its table (``rocky dag``): name -> description."""
    out: dict[str, str] = {}
    for check in node.checks:
        if _own(node, check.pipeline):
            name = ANOMALY_CHECK if check.kind == "anomaly" else check.name
            out[name] = _describe(check.kind, check.column, assertion=False)
    for assertion in node.assertions:
        if _own(node, assertion.pipeline):
            out[assertion.name] = _describe(assertion.kind, assertion.column, assertion=True)
    return out


def quality_checks(node: DagNode) -> list[tuple[str, str, str]]:
    """``(pipeline, name, description)`` of the checks another (quality) pipeline evaluates on the node."""
    out: list[tuple[str, str, str]] = []
    for check in node.checks:
        if not _own(node, check.pipeline):
            assert check.pipeline is not None
            name = ANOMALY_CHECK if check.kind == "anomaly" else check.name
            out.append((check.pipeline, name, _describe(check.kind, check.column, assertion=False)))
    for assertion in node.assertions:
        if not _own(node, assertion.pipeline):
            assert assertion.pipeline is not None
            out.append(
                (
                    assertion.pipeline,
                    assertion.name,
                    _describe(assertion.kind, assertion.column, assertion=True),
                )
            )
    return out


@dataclass(frozen=True)
class RockyAssetEntry:
    """One discovered table and the asset it maps to."""

    key: dg.AssetKey
    source: SourceInfo
    table: TableInfo
    group: str
    partition: str | None = None


@dataclass
class RockyAssetIndex:
    """Every discovered table with its Dagster key, specs deduplicated, engine keys resolvable."""

    entries: list[RockyAssetEntry]
    specs: dict[dg.AssetKey, dg.AssetSpec]
    #: asset key -> check name -> description: the configured checks of each table
    checks: dict[dg.AssetKey, dict[str, str]]
    by_engine_key: dict[tuple[str, ...], RockyAssetEntry] = field(default_factory=dict)
    #: (component name, value) -> ids of every source with that value, for whole-tenant filters
    sources_by_component: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    #: table name -> ids of every source that has a table of that name, for ``table=`` filters
    sources_by_table: dict[str, set[str]] = field(default_factory=dict)
    #: asset key -> what rocky dag knows before a run (the target table), for streamed materializations
    facts: dict[dg.AssetKey, dict[str, Any]] = field(default_factory=dict)

    def groups(self) -> dict[str, list[RockyAssetEntry]]:
        out: dict[str, list[RockyAssetEntry]] = {}
        for entry in self.entries:
            out.setdefault(entry.group, []).append(entry)
        return out

    def resolve(self, engine_key: list[str]) -> RockyAssetEntry | None:
        """The entry of an engine asset key (``[source_type, *components, table]``)."""
        return self.by_engine_key.get(tuple(engine_key))


def engine_keys(source: SourceInfo, table: TableInfo) -> list[tuple[str, ...]]:
    """The keys the engine may report for a table: list components joined with ``__``, or flattened."""
    joined = (source.source_type, *(component_value(v) for v in source.components.values()), table.name)
    flat: list[str] = [source.source_type]
    for value in source.components.values():
        flat.extend([value] if isinstance(value, str) else value)
    flat.append(table.name)
    return [joined] if tuple(flat) == joined else [joined, tuple(flat)]


def build_index(
    discover: DiscoverResult,
    translator: RockyDagsterTranslator | None = None,
    *,
    tenant_component: str | None = None,
    partitions_def: dg.PartitionsDefinition | None = None,
    dag: DagResult | None = None,
) -> RockyAssetIndex:
    """Map every discovered table to its asset key, spec and configured checks (from ``dag`` if given).

    Raises:
        dg.DagsterInvalidDefinitionError: two tables map to one key outside tenant mode.
    """
    translator = translator or RockyDagsterTranslator()
    checks: DiscoverChecks | None = discover.checks
    fallback = {FRESHNESS_CHECK: _CHECK_DESCRIPTIONS[FRESHNESS_CHECK]} if checks and checks.freshness else {}
    configured: dict[dg.AssetKey, dict[str, str]] = {}
    facts: dict[dg.AssetKey, dict[str, Any]] = {}
    if dag is not None:
        from dagster_rocky.streaming import node_facts

        for node in dag.nodes:
            if node.kind == "replication":
                key = translator.get_dag_node_asset_key(node)
                configured[key] = node_checks(node)
                facts[key] = node_facts(node)
    by_key_checks: dict[dg.AssetKey, dict[str, str]] = {}
    entries: list[RockyAssetEntry] = []
    specs: dict[dg.AssetKey, dg.AssetSpec] = {}
    owner: dict[dg.AssetKey, str] = {}
    by_engine_key: dict[tuple[str, ...], RockyAssetEntry] = {}
    by_component: dict[tuple[str, str], set[str]] = {}
    by_table: dict[str, set[str]] = {}
    for source in discover.sources:
        view = strip_tenant(source, tenant_component)
        partition = tenant_of(source, tenant_component, translator) if tenant_component else None
        group = translator.get_group_name(view)
        for name, value in source.components.items():
            by_component.setdefault((name, component_value(value)), set()).add(source.id)
        for table in source.tables:
            by_table.setdefault(table.name, set()).add(source.id)
            spec = translator.get_asset_spec(view, table, checks)
            key = spec.key
            if key in specs:
                if not tenant_component:
                    raise dg.DagsterInvalidDefinitionError(
                        f"sources '{owner[key]}' and '{source.id}' both map table '{table.name}' to asset "
                        f"key {key.to_user_string()}; make RockyDagsterTranslator.get_asset_key unique "
                        "(or use tenant mode to collapse tenants into partitions)"
                    )
            else:
                if partitions_def is not None:
                    spec = spec.replace_attributes(partitions_def=partitions_def)
                specs[key] = spec
                owner[key] = source.id
                by_key_checks[key] = configured.get(key, fallback) if dag is not None else fallback
            entry = RockyAssetEntry(
                key=key, source=source, table=table, group=spec.group_name or group, partition=partition
            )
            entries.append(entry)
            for ek in engine_keys(source, table):
                by_engine_key[ek] = entry
    return RockyAssetIndex(
        entries=entries,
        specs=specs,
        checks=by_key_checks,
        by_engine_key=by_engine_key,
        sources_by_component=by_component,
        sources_by_table=by_table,
        facts=facts,
    )


def specs_from_discover(
    discover: DiscoverResult,
    translator: RockyDagsterTranslator | None = None,
    *,
    tenant_component: str | None = None,
    partitions_def: dg.PartitionsDefinition | None = None,
) -> list[dg.AssetSpec]:
    """One ``AssetSpec`` per discovered table (one per collapsed table in tenant mode)."""
    index = build_index(
        discover, translator, tenant_component=tenant_component, partitions_def=partitions_def
    )
    return list(index.specs.values())


def load_rocky_assets(
    rocky: RockyResource,
    translator: RockyDagsterTranslator | None = None,
    *,
    pipeline: str | None = None,
    models: bool = True,
) -> list[dg.AssetSpec]:
    """One ``AssetSpec`` per discovered table (``rocky discover``) and, with ``models``, one per
    transformation model (``rocky dag``), the models' deps pointing at the tables' keys."""
    specs = specs_from_discover(rocky.discover(pipeline), translator)
    if models:
        from dagster_rocky.models import specs_from_dag

        specs += specs_from_dag(rocky.dag(), translator)
    return specs


def check_specs_for(index: RockyAssetIndex, keys: list[dg.AssetKey]) -> list[dg.AssetCheckSpec]:
    return [
        dg.AssetCheckSpec(name, asset=key, description=description)
        for key in keys
        for name, description in index.checks.get(key, {}).items()
    ]


def build_rocky_assets(
    rocky_or_discover: RockyResource | DiscoverResult,
    *,
    translator: RockyDagsterTranslator | None = None,
    resource_key: str = "rocky",
    pipeline: str | None = None,
    op_tags: Mapping[str, Any] | None = None,
    tenant_component: str | None = None,
    partitions_def: dg.PartitionsDefinition | None = None,
    name_prefix: str = "rocky",
    dag: DagResult | None = None,
    pool: str | None = DEFAULT_POOL,
) -> list[dg.AssetsDefinition]:
    """One subset-aware multi-asset per group, executed with ``rocky run --filter``.

    Args:
        rocky_or_discover: a resource (``discover`` runs now) or an already parsed discover result.
        translator: keys, groups, tags and metadata; pass the same one to the sensor.
        resource_key: the key the ``RockyResource`` is bound to in ``Definitions(resources=...)``.
        pipeline: the replication pipeline to run (required when the project has several).
        op_tags: tags of every step (e.g. concurrency pools).
        tenant_component: collapse this component into the dynamic partitions ``partitions_def``.
        partitions_def: required with ``tenant_component``.
        dag: the ``rocky dag`` document, whose configured checks become check specs (with a resource and
            no ``dag``, ``rocky dag`` runs now); without one only discover's freshness check is declared.
        pool: the Dagster concurrency pool of every step (see ``DEFAULT_POOL``); None: no pool.
    """
    from dagster_rocky.execution import GroupPlan, execute_group

    if (tenant_component is None) != (partitions_def is None):
        raise ValueError("tenant_component and partitions_def must be passed together")
    translator = translator or RockyDagsterTranslator()
    if isinstance(rocky_or_discover, RockyResource):
        discover = rocky_or_discover.discover(pipeline)
        dag = dag if dag is not None else rocky_or_discover.dag(pipeline)
    else:
        discover = rocky_or_discover
    index = build_index(
        discover, translator, tenant_component=tenant_component, partitions_def=partitions_def, dag=dag
    )
    out: list[dg.AssetsDefinition] = []
    for group, entries in sorted(index.groups().items()):
        keys = list(dict.fromkeys(e.key for e in entries))
        plan = GroupPlan(
            group=group, entries=entries, index=index, pipeline=pipeline, tenant_component=tenant_component
        )
        out.append(
            group_multi_asset(
                name=safe_name(f"{name_prefix}_{group}"),
                specs=[index.specs[k].replace_attributes(skippable=True) for k in keys],
                check_specs=check_specs_for(index, keys),
                plan=plan,
                resource_key=resource_key,
                op_tags=op_tags,
                partitions_def=partitions_def,
                execute=execute_group,
                pool=pool,
            )
        )
    return out


def group_multi_asset(
    *,
    name: str,
    specs: list[dg.AssetSpec],
    check_specs: list[dg.AssetCheckSpec],
    plan: Any,
    resource_key: str,
    op_tags: Mapping[str, Any] | None,
    partitions_def: dg.PartitionsDefinition | None,
    execute: Any,
    pool: str | None = None,
) -> dg.AssetsDefinition:
    @dg.multi_asset(
        name=name,
        specs=specs,
        check_specs=check_specs,
        can_subset=True,
        required_resource_keys={resource_key},
        op_tags=op_tags,
        partitions_def=partitions_def,
        pool=pool,
    )
    @with_context_class
    def _rocky_group(context: dg.AssetExecutionContext) -> Iterator[Any]:
        rocky: RockyResource = getattr(context.resources, resource_key)
        yield from execute(context, rocky, plan)

    return _rocky_group


def with_context_class(fn: F, cls: type = dg.AssetExecutionContext) -> F:
    """Dagster checks the ``context`` annotation as a class; postponed annotations make it a string."""
    fn.__annotations__["context"] = cls
    return fn
