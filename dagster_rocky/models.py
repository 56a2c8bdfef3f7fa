"""Transformation models as Dagster assets, from ``rocky dag`` (no hand-written list of models).

``specs_from_dag`` gives one ``AssetSpec`` per model: key, group, description, owners, tags, freshness and
``code_version`` (the SQL hash) through the translator's ``get_dag_node_*`` methods, deps on the models
and replicated tables it reads (a replicated table's key is the one the replication asset has).
``build_rocky_model_assets`` adds execution: one subset-aware multi-asset per transformation pipeline
that runs exactly the selected models in ONE ``rocky run --pipeline P --model a --model b ...`` and
streams their events, plus one multi-asset check per quality pipeline for the assertions a quality
pipeline evaluates on models or tables (``rocky run --pipeline <quality>``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from dagster_rocky.assets import DEFAULT_POOL, node_checks, quality_checks, with_context_class
from dagster_rocky.execution import raise_for_failures, run_problems
from dagster_rocky.resource import RockyResource
from dagster_rocky.streaming import EventRouting, node_facts
from dagster_rocky.translator import RockyDagsterTranslator, safe_name
from dagster_rocky.types import DagNode, DagResult

TRANSFORMATION = "transformation"


@dataclass
class ModelIndex:
    """Every model of a ``rocky dag`` document with its Dagster key and spec."""

    specs: dict[dg.AssetKey, dg.AssetSpec]
    #: pipeline -> (model name, Dagster key), in the document's order
    by_pipeline: dict[str, list[tuple[str, dg.AssetKey]]]
    #: engine asset key (of models and replicated tables) -> Dagster key
    by_engine_key: dict[tuple[str, ...], dg.AssetKey]
    #: Dagster key -> check name -> description: checks the model's own pipeline evaluates
    checks: dict[dg.AssetKey, dict[str, str]]
    #: quality pipeline -> [(Dagster key, check name, description)]
    quality: dict[str, list[tuple[dg.AssetKey, str, str]]] = field(default_factory=dict)
    #: Dagster key -> what rocky dag knows before a run (target table, strategy, SQL hash)
    facts: dict[dg.AssetKey, dict[str, Any]] = field(default_factory=dict)


def build_model_index(dag: DagResult, translator: RockyDagsterTranslator | None = None) -> ModelIndex:
    """Translate every node once; deps follow ``depends_on`` through the translated keys.

    Raises:
        dg.DagsterInvalidDefinitionError: two models map to one key.
    """
    translator = translator or RockyDagsterTranslator()
    keys = {node.id: translator.get_dag_node_asset_key(node) for node in dag.nodes}
    engine_keys = {tuple(node.asset_key) for node in dag.nodes}
    index = ModelIndex(specs={}, by_pipeline={}, by_engine_key={}, checks={})
    owner: dict[dg.AssetKey, str] = {}
    for node in dag.nodes:
        key = keys[node.id]
        if node.asset_key:
            index.by_engine_key[tuple(node.asset_key)] = key
        index.facts[key] = node_facts(node)
        for pipeline, name, description in quality_checks(node):
            index.quality.setdefault(pipeline, []).append((key, name, description))
        if node.kind != TRANSFORMATION:
            continue
        if key in owner:
            raise dg.DagsterInvalidDefinitionError(
                f"models '{owner[key]}' and '{node.label}' both map to asset key {key.to_user_string()}; "
                "make RockyDagsterTranslator.get_dag_node_asset_key unique"
            )
        owner[key] = node.label
        index.specs[key] = translator.get_dag_node_spec(node, _deps(node, keys, engine_keys))
        index.by_pipeline.setdefault(node.pipeline or "", []).append((node.label, key))
        index.checks[key] = node_checks(node)
    return index


def _deps(
    node: DagNode, keys: Mapping[str, dg.AssetKey], engine_keys: set[tuple[str, ...]]
) -> list[dg.AssetKey]:
    """The translated keys of what ``node`` reads; a replicated table with no node keeps its engine key."""
    deps = [keys[dep] for dep in node.depends_on if dep in keys]
    deps += [dg.AssetKey(table) for table in node.upstream_tables if tuple(table) not in engine_keys]
    return list(dict.fromkeys(deps))


def specs_from_dag(dag: DagResult, translator: RockyDagsterTranslator | None = None) -> list[dg.AssetSpec]:
    """One ``AssetSpec`` per model of the ``rocky dag`` document."""
    return list(build_model_index(dag, translator).specs.values())


def build_rocky_model_assets(
    rocky_or_dag: RockyResource | DagResult,
    *,
    translator: RockyDagsterTranslator | None = None,
    resource_key: str = "rocky",
    op_tags: Mapping[str, Any] | None = None,
    name_prefix: str = "rocky",
    pool: str | None = DEFAULT_POOL,
) -> list[dg.AssetsDefinition | dg.AssetChecksDefinition]:
    """One multi-asset per transformation pipeline and one multi-asset check per quality pipeline.

    Args:
        rocky_or_dag: a resource (``rocky dag`` runs now) or an already parsed ``rocky dag`` document.
        translator: keys, groups, tags ...; pass the one the replication assets use so deps line up.
        resource_key: the key the ``RockyResource`` is bound to.
        op_tags: tags of every step.
        name_prefix: prefix of the definitions' names (``<prefix>_<pipeline>``).
        pool: the Dagster concurrency pool of every step (see ``DEFAULT_POOL``); None: no pool.
    """
    dag = rocky_or_dag.dag() if isinstance(rocky_or_dag, RockyResource) else rocky_or_dag
    index = build_model_index(dag, translator)
    out: list[dg.AssetsDefinition | dg.AssetChecksDefinition] = []
    for pipeline, models in sorted(index.by_pipeline.items()):
        out.append(
            _pipeline_multi_asset(
                name=safe_name(f"{name_prefix}_{pipeline or 'models'}"),
                pipeline=pipeline or None,
                models=models,
                index=index,
                resource_key=resource_key,
                op_tags=op_tags,
                pool=pool,
            )
        )
    for pipeline, checks in sorted(index.quality.items()):
        out.append(
            _quality_checks(
                name=safe_name(f"{name_prefix}_{pipeline}_checks"),
                pipeline=pipeline,
                checks=checks,
                index=index,
                resource_key=resource_key,
                op_tags=op_tags,
                pool=pool,
            )
        )
    return out


def model_selection(models: list[tuple[str, dg.AssetKey]], selected: set[dg.AssetKey]) -> list[str] | None:
    """The ``--model`` names of a selection: None (the whole pipeline) when every model is selected."""
    names = [name for name, key in models if key in selected]
    return None if len(names) == len(models) else names


def _pipeline_multi_asset(
    *,
    name: str,
    pipeline: str | None,
    models: list[tuple[str, dg.AssetKey]],
    index: ModelIndex,
    resource_key: str,
    op_tags: Mapping[str, Any] | None,
    pool: str | None,
) -> dg.AssetsDefinition:
    keys = [key for _, key in models]
    check_specs = [
        dg.AssetCheckSpec(check, asset=key, description=description)
        for key in keys
        for check, description in index.checks.get(key, {}).items()
    ]

    @dg.multi_asset(
        name=name,
        specs=[index.specs[key] for key in keys],
        check_specs=check_specs,
        can_subset=True,
        required_resource_keys={resource_key},
        op_tags=op_tags,
        pool=pool,
    )
    @with_context_class
    def _rocky_models(context: dg.AssetExecutionContext) -> Iterator[Any]:
        rocky: RockyResource = getattr(context.resources, resource_key)
        selected = set(context.selected_asset_keys)
        names = model_selection(models, selected)
        if names == []:
            context.log.info(f"rocky: no model of pipeline '{pipeline}' selected for this step")
            return
        routing = EventRouting(
            keys=index.by_engine_key,
            selected=selected,
            checks=set(context.selected_asset_check_keys),
            facts=index.facts,
        )
        stream = rocky.run_streaming(context, pipeline=pipeline, model=names, routing=routing)
        materialized = 0
        for event in stream:
            materialized += isinstance(event, dg.MaterializeResult)
            yield event
        result = stream.result
        problems = run_problems(result, f"the run of pipeline {pipeline}")
        if not result.interrupted and result.status == "Failure" and not result.errors and not stream.failed:
            problems.append(f"the run of pipeline {pipeline} failed without naming a model")
        raise_for_failures(stream.failed, problems, f"pipeline '{pipeline}'", materialized)

    return _rocky_models


def _quality_checks(
    *,
    name: str,
    pipeline: str,
    checks: list[tuple[dg.AssetKey, str, str]],
    index: ModelIndex,
    resource_key: str,
    op_tags: Mapping[str, Any] | None,
    pool: str | None,
) -> dg.AssetChecksDefinition:
    specs = [
        dg.AssetCheckSpec(check, asset=key, description=description) for key, check, description in checks
    ]

    @dg.multi_asset_check(
        name=name,
        specs=specs,
        can_subset=True,
        required_resource_keys={resource_key},
        op_tags=op_tags,
        pool=pool,
    )
    @_check_context
    def _rocky_quality(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        rocky: RockyResource = getattr(context.resources, resource_key)
        selected = set(context.selected_asset_check_keys)
        routing = EventRouting(
            keys=index.by_engine_key, selected={k.asset_key for k in selected}, checks=selected
        )
        stream = rocky.run_streaming(context.op_execution_context, pipeline=pipeline, routing=routing)
        for event in stream:
            if isinstance(event, dg.AssetCheckResult):  # a check step reports checks only
                yield event
        # a failed check is its result (Dagster shows it); a run-level error or a checked table the run
        # could not read fails the step, as it fails the engine's run
        problems = run_problems(stream.result, f"the run of quality pipeline {pipeline}")
        raise_for_failures(stream.failed, problems, f"quality pipeline '{pipeline}'", 0)

    return _rocky_quality


def _check_context(fn: Any) -> Any:
    return with_context_class(fn, dg.AssetCheckExecutionContext)
