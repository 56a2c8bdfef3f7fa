"""``rocky dag``: the project's model DAG for orchestrators, built from files alone (no warehouse).

Nodes: every model of every transformation pipeline, and every table a replication pipeline writes. The
replicated tables come from the discovery cache (``.rocky/discover.json``, written by each full ``rocky
discover``) when there is one, and from the config besides: a table a model reads (``schema.table`` in
its SQL) whose schema (and catalog) the pipeline's ``schema_template`` (and ``catalog_template``) render
is a table of that pipeline, its components read back from the name (``match_template``). So a model's
``depends_on`` names the replication asset it reads even before anything was discovered.

Targets resolve as in a run (sidecar, ``_defaults.toml``, then the adapter's catalog and default schema,
which its plugin knows without connecting). Checks are the configured ones only: the pipeline's
``[checks]`` (on models built as tables) and the assertions whose ``table`` names the node's table,
including those of quality pipelines that check it (``pipeline`` then names the quality pipeline).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocky_engine.checks.assertions import assertion_applies
from rocky_engine.config.pipelines import QualityPipeline, ReplicationPipeline, TransformationPipeline
from rocky_engine.config.schema_pattern import (
    ComponentValue,
    SchemaPattern,
    asset_key,
    match_template,
    render_template,
)
from rocky_engine.errors import ConfigError, UsageError
from rocky_engine.graph import topological_order
from rocky_engine.output import Result, render_rows
from rocky_engine.wire.dag import (
    DagAssertion,
    DagCheck,
    DagEdge,
    DagFreshness,
    DagNode,
    DagResult,
    DagSource,
    DagStrategy,
    DagSummary,
    DagTarget,
)

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig
    from rocky_engine.config.checks import Assertion, ChecksConfig
    from rocky_engine.models import Model, ModelSet
    from rocky_engine.project import Project

#: the quality pipelines of the project, with their names
_Quality = list[tuple[str, QualityPipeline]]
#: a source of the discovery cache: (schema, components, source type, table names)
_CachedSource = tuple[str, dict[str, ComponentValue], str, list[str]]
#: strategies that build no table, so the pipeline's table checks never run on them
_NOT_TABLES = frozenset({"view", "ephemeral"})


class DagOutput(DagResult, Result):
    """The result of ``rocky dag``: its document plus a table for people."""

    def wire(self) -> dict[str, Any]:
        with gc_paused():
            return super().wire()

    def render_table(self) -> str:
        rows = [
            [n.id, n.pipeline or "", ".".join(n.asset_key), str(len(n.depends_on))] for n in self.nodes
        ]
        head = (f"{self.summary.total_nodes} node(s), {self.summary.total_edges} edge(s), "
                f"{self.summary.execution_layers} layer(s)\n")
        return head + render_rows(None, ["node", "pipeline", "asset key", "upstream"], rows)


@dataclass(frozen=True, slots=True)
class _Replicated:
    """A table a replication pipeline writes: the node id models refer to it by."""

    node_id: str
    asset_key: list[str]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for a bounded stretch that only allocates objects that stay alive (the
    nodes of a 10,000-model project and their documents): it would walk them again and again for nothing,
    about half the time of ``rocky dag`` on such a project. Left as it was found."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def build_dag(project: Project, pipeline_name: str | None = None) -> DagOutput:
    """The DAG of every transformation and replication pipeline (or only ``pipeline_name``'s nodes).

    Raises:
        ConfigError: an unknown pipeline; ModelError: a model file does not load.
        UsageError: ``pipeline_name`` is neither a transformation nor a replication pipeline.
    """
    with gc_paused():
        return _build(project, pipeline_name)


def _build(project: Project, pipeline_name: str | None) -> DagOutput:
    config = project.config
    if pipeline_name is not None:
        chosen = config.pipeline(pipeline_name)
        if not isinstance(chosen, TransformationPipeline | ReplicationPipeline):
            raise UsageError(
                f"pipeline '{pipeline_name}' is a {chosen.type} pipeline; rocky dag shows transformation "
                "models and replicated tables",
                hint="name a transformation or replication pipeline, or omit --pipeline",
            )
    replication = _ReplicationIndex(config, _cached_sources(project))
    quality = [(n, p) for n, p in config.pipelines.items() if isinstance(p, QualityPipeline)]
    model_nodes: list[DagNode] = []
    for name, pipeline in config.pipelines.items():
        if not isinstance(pipeline, TransformationPipeline):
            continue
        model_set = project.load_models(name)
        catalog, schema, warehouse = _warehouse(config, pipeline.target.adapter)
        for model_name in model_set.order:
            model = model_set.models[model_name]
            target = DagTarget(catalog=model.target.catalog or catalog,
                               schema=model.target.schema or schema, table=model.target.table or model_name)
            refs = model_set.tables.get(model_name, ())
            upstream = _unique(t for t in (replication.resolve(r, target.catalog) for r in refs) if t)
            node = _model_node(project, name, pipeline.checks, model, model_set, target, upstream, quality)
            node.warehouse = warehouse
            model_nodes.append(node)
    nodes = replication.nodes(quality) + model_nodes
    if pipeline_name is not None:
        nodes = [n for n in nodes if n.pipeline == pipeline_name]
    return _assemble(nodes)


def _model_node(
    project: Project, pipeline: str, checks: ChecksConfig, model: Model, model_set: ModelSet,
    target: DagTarget, upstream: list[_Replicated], quality: _Quality,
) -> DagNode:
    strategy = model.strategy
    parts = [target.catalog, target.schema_, target.table]
    builds_table = strategy.type not in _NOT_TABLES
    return DagNode(
        id=f"transformation:{model.name}",
        kind="transformation",
        label=model.name,
        pipeline=pipeline,
        depends_on=[*(t.node_id for t in upstream), *(f"transformation:{d}" for d in model.depends_on)],
        strategy=DagStrategy(
            type=strategy.type, timestamp_column=strategy.timestamp_column,
            unique_key=list(strategy.unique_key), update_columns=list(strategy.update_columns),
            partition_by=list(strategy.partition_by),
        ),
        target=target,
        freshness=DagFreshness(max_lag_seconds=model.max_lag_seconds) if model.max_lag_seconds else None,
        asset_key=parts,
        upstream_models=list(model.depends_on),
        upstream_tables=[t.asset_key for t in upstream],
        sql_hash=model.sql_hash,
        description=model.description or model.leading_comment,
        owners=list(model.owners),
        tags=dict(model.tags),
        # A view or an ephemeral model is never checked by its own pipeline (it builds no table).
        assertions=_assertions(checks if builds_table else None, parts, quality),
        checks=_checks(checks if builds_table else None, strategy.timestamp_column)
        + _quality_checks(parts, quality),
        sql_path=_relative(str(project.root) + os.sep, model),
    )


def _relative(root: str, model: Model) -> str:
    """The model file relative to the project directory (string work: ``Path.relative_to`` costs a
    tenth of the command on 10,000 models)."""
    path = str(model.path)
    return path[len(root):].replace(os.sep, "/") if path.startswith(root) else model.path.as_posix()


def _warehouse(config: RockyConfig, adapter: str) -> tuple[str, str, str]:
    """(catalog, default schema, type) of a warehouse adapter, from its plugin (no connection)."""
    from rocky_engine.adapters.registry import plugin_of

    found = plugin_of(config, adapter)
    # ci_source answers the catalog without connecting (the DuckDB file stem, the PostgreSQL dbname).
    return found.ci_source(config, adapter).catalog, found.default_schema, found.type


def _checks(checks: ChecksConfig | None, timestamp_column: str | None, *, source: bool = False,
            pipeline: str | None = None) -> list[DagCheck]:
    """The checks ``[checks]`` runs on one table, named as their results are (``check_results[]``)."""
    if checks is None or not checks.enabled:
        return []
    out: list[DagCheck] = []
    if checks.row_count:
        out.append(DagCheck(name="row_count", kind="row_count", pipeline=pipeline))
        # Anomaly detection reads the count row_count takes: no count, no anomaly.
        out.append(DagCheck(name="row_count_anomaly", kind="anomaly", severity="warning", pipeline=pipeline))
    if checks.column_match.enabled and source:
        out.append(DagCheck(name="column_match", kind="column_match", severity=checks.column_match.severity,
                            pipeline=pipeline))
    if checks.freshness is not None and timestamp_column:
        out.append(DagCheck(name="freshness", kind="freshness", severity=checks.freshness.severity,
                            pipeline=pipeline))
    if checks.null_rate is not None:
        out.extend(DagCheck(name="null_rate", kind="null_rate", column=c, severity=checks.null_rate.severity,
                            pipeline=pipeline) for c in checks.null_rate.columns)
    out.extend(DagCheck(name=c.name, kind="custom", severity=c.severity, pipeline=pipeline)
               for c in checks.custom)
    return out


def _assertions(checks: ChecksConfig | None, parts: list[str], quality: _Quality) -> list[DagAssertion]:
    out: list[DagAssertion] = []
    if checks is not None and checks.enabled:
        out.extend(_assertion(a, None) for a in checks.assertions if assertion_applies(a.table, parts))
    for q, name in _checking(parts, quality):
        out.extend(_assertion(a, name) for a in q.checks.assertions if assertion_applies(a.table, parts))
    return out


def _quality_checks(parts: list[str], quality: _Quality) -> list[DagCheck]:
    return [c for q, name in _checking(parts, quality) for c in _checks(q.checks, q.timestamp_column,
                                                                           pipeline=name)]


def _checking(parts: list[str], quality: _Quality) -> list[tuple[QualityPipeline, str]]:
    """The quality pipelines (and their names) whose ``tables`` cover the table ``parts``."""
    out = []
    for name, q in quality:
        if not q.checks.enabled:
            continue
        for t in q.tables:
            if (t.catalog.lower(), t.schema_.lower()) == (parts[0].lower(), parts[1].lower()) and (
                t.table is None or t.table.lower() == parts[2].lower()
            ):
                out.append((q, name))
                break
    return out


def _assertion(a: Assertion, pipeline: str | None) -> DagAssertion:
    return DagAssertion(name=a.display_name, kind=a.type, column=a.column, severity=a.severity,
                        pipeline=pipeline)


def _unique(items: Iterable[_Replicated]) -> list[_Replicated]:
    seen: dict[str, _Replicated] = {}
    for item in items:
        seen.setdefault(item.node_id, item)
    return list(seen.values())


class _ReplicationIndex:
    """The tables replication pipelines write: from the discovery cache, and from the tables models read."""

    def __init__(self, config: RockyConfig, cached: dict[str, list[_CachedSource]]) -> None:
        self.config = config
        self._nodes: dict[str, DagNode] = {}
        self._by_table: dict[str, _Replicated] = {}
        self._pipelines: list[tuple[str, ReplicationPipeline, SchemaPattern, str, str]] = []
        for name, pipeline in config.pipelines.items():
            if not isinstance(pipeline, ReplicationPipeline):
                continue
            pattern = SchemaPattern.from_config(pipeline.source.schema_pattern)
            source_type = _source_type(config, pipeline)
            warehouse = _warehouse_type(config, pipeline.target.adapter)
            self._pipelines.append((name, pipeline, pattern, source_type, warehouse))
            for source_schema, components, cached_type, tables in cached.get(name, ()):
                for table in tables:
                    self._add(name, pipeline, cached_type or source_type, warehouse, components, table,
                              source_schema)

    def _add(self, name: str, pipeline: ReplicationPipeline, source_type: str, warehouse: str,
             components: dict[str, ComponentValue], table: str, source_schema: str) -> _Replicated:
        target = pipeline.target
        catalog = render_template(target.catalog_template, components, target.separator,
                                  key="target.catalog_template")
        schema = render_template(target.schema_template, components, target.separator,
                                 key="target.schema_template")
        key = asset_key(source_type, components, table)
        node_id = f"replication:{name}/{'/'.join(key)}"
        table_key = f"{catalog}.{schema}.{table}".lower()
        found = self._by_table.get(table_key)
        if found is not None:
            return found
        parts = [catalog, schema, table]
        self._nodes[node_id] = DagNode(
            id=node_id, kind="replication", label=table, pipeline=name, target=DagTarget(
                catalog=catalog, schema=schema, table=table), warehouse=warehouse, asset_key=key,
            checks=_checks(pipeline.checks, pipeline.timestamp_column, source=True),
            assertions=_assertions(pipeline.checks, parts, []),
            source=DagSource(catalog=pipeline.source.catalog, schema=source_schema, table=table,
                             source_type=source_type, components=dict(components)),
        )
        found = _Replicated(node_id, key)
        self._by_table[table_key] = found
        return found

    def resolve(self, ref: tuple[str, ...], default_catalog: str) -> _Replicated | None:
        """The replicated table a model's dotted reference names, if a replication pipeline writes it."""
        if len(ref) == 2:
            catalog, schema, table = default_catalog, ref[0], ref[1]
        elif len(ref) == 3:
            catalog, schema, table = ref
        else:
            return None
        found = self._by_table.get(f"{catalog}.{schema}.{table}".lower())
        if found is not None:
            return found
        for name, pipeline, pattern, source_type, warehouse in self._pipelines:
            target = pipeline.target
            components = match_template(target.schema_template, pattern, target.separator, schema)
            at_catalog = match_template(target.catalog_template, pattern, target.separator, catalog)
            if components is None or at_catalog is None:
                continue
            if any(components.get(k, v) != v for k, v in at_catalog.items()):
                continue
            merged = {**at_catalog, **components}
            if set(merged) != set(pattern.names):
                continue  # the target name does not carry every component: the source is not knowable
            ordered = {c: merged[c] for c in pattern.names}
            source_schema = pattern.head + pattern.separator.join(
                pattern.separator.join(v) if isinstance(v, list) else v for v in ordered.values())
            return self._add(name, pipeline, source_type, warehouse, ordered, table, source_schema)
        return None

    def nodes(self, quality: _Quality) -> list[DagNode]:
        out = sorted(self._nodes.values(), key=lambda n: n.id)
        for node in out:
            assert node.target is not None
            parts = [node.target.catalog, node.target.schema_, node.target.table]
            node.checks = node.checks + _quality_checks(parts, quality)
            node.assertions = node.assertions + _assertions(None, parts, quality)
        return out


def _source_type(config: RockyConfig, pipeline: ReplicationPipeline) -> str:
    """What discovery reports as the sources' type: the discovery adapter's type."""
    name = pipeline.source.discovery.adapter if pipeline.source.discovery else pipeline.source.adapter
    return config.adapter(name).type


def _warehouse_type(config: RockyConfig, adapter: str) -> str:
    return config.adapter(adapter).type


def _cached_sources(project: Project) -> dict[str, list[_CachedSource]]:
    """Per replication pipeline, the sources of the last full ``rocky discover``: (schema, components,
    source type, tables). No cache, or one that does not read: only the config's tables."""
    from rocky_engine.replication.discover import read_cache

    doc = read_cache(project.dot_rocky)
    out: dict[str, list[_CachedSource]] = {}
    for source in doc.sources if doc is not None else ():
        pipeline = source.metadata.get("pipeline")
        if isinstance(pipeline, str):
            out.setdefault(pipeline, []).append(
                (source.id, dict(source.components), source.source_type, [t.name for t in source.tables]))
    return out


def _assemble(nodes: list[DagNode]) -> DagOutput:
    """Edges, execution layers and the summary of ``nodes`` (edges only between nodes present)."""
    ids = {n.id for n in nodes}
    edges = [DagEdge(**{"from": dep, "to": n.id}) for n in nodes for dep in n.depends_on if dep in ids]
    upstream = {n.id: [d for d in n.depends_on if d in ids] for n in nodes}
    order = topological_order(upstream)
    if len(order) != len(ids):
        raise ConfigError("the DAG has a cycle")  # model cycles are refused when the models load
    depth: dict[str, int] = {}
    for node_id in order:
        depth[node_id] = 1 + max((depth[d] for d in upstream[node_id]), default=-1)
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node_id in order:
        layers[depth[node_id]].append(node_id)
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.kind] = counts.get(n.kind, 0) + 1
    return DagOutput(
        nodes=nodes, edges=edges, execution_layers=layers,
        summary=DagSummary(total_nodes=len(nodes), total_edges=len(edges), execution_layers=len(layers),
                           counts_by_kind=counts),
    )
