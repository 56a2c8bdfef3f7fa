"""One group's step: pick the ``--filter`` runs for the selected subset and turn their JSON into events.

Rules (issue 4): one ``MaterializeResult`` per materialized selected table, one ``AssetCheckResult`` per
selected declared check, never a result for an unselected key or an undeclared check, never two for one
key; a declared check the engine did not produce gets a placeholder result; a failed table gets no
materialization and the step fails after everything that did succeed has been reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from dagster_rocky.assets import RockyAssetEntry, RockyAssetIndex
from dagster_rocky.resource import RockyResource
from dagster_rocky.translator import component_value
from dagster_rocky.types import CheckResult, MaterializationInfo, RunResult, SourceInfo, TableError
from rocky_engine.wire.metadata import check_metadata, dagster_severity, materialization_metadata


@dataclass(frozen=True)
class GroupPlan:
    """What one group's multi-asset can run."""

    group: str
    entries: list[RockyAssetEntry]
    index: RockyAssetIndex
    pipeline: str | None = None
    tenant_component: str | None = None


def choose_filters(entries: list[RockyAssetEntry], index: RockyAssetIndex) -> list[str]:
    """The ``--filter`` values that run the selected tables and as little else as possible.

    - several whole sources that are exactly every source with one value of their first component (a
      whole tenant): one ``<component>=<value>`` run;
    - a whole source: ``id=<source id>``;
    - some tables of a source, each name found in no other source: one ``table=<name>`` run per table;
    - otherwise ``id=<source id>`` (the extra tables run, but only selected ones are reported).
    """
    sources: dict[str, SourceInfo] = {}
    chosen: dict[str, set[str]] = {}
    for entry in entries:
        sources[entry.source.id] = entry.source
        chosen.setdefault(entry.source.id, set()).add(entry.table.name)
    if not sources:
        return []
    whole = {sid for sid, src in sources.items() if chosen[sid] >= {t.name for t in src.tables}}
    if len(sources) > 1 and whole == set(sources):
        firsts = {_first_component(src) for src in sources.values()}
        if len(firsts) == 1 and None not in firsts:
            first = next(iter(firsts))
            assert first is not None
            if index.sources_by_component.get(first, set()) == set(sources):
                return [f"{first[0]}={first[1]}"]
    filters: list[str] = []
    for sid in sorted(sources):
        names = chosen[sid]
        if sid not in whole and all(index.sources_by_table.get(n, set()) == {sid} for n in names):
            filters.extend(f"table={name}" for name in sorted(names))
        else:
            filters.append(f"id={sid}")
    return filters


def _first_component(source: SourceInfo) -> tuple[str, str] | None:
    if not source.components:
        return None
    name, value = next(iter(source.components.items()))
    return name, component_value(value)


def plan_runs(entries: list[RockyAssetEntry], plan: GroupPlan) -> list[tuple[str | None, str]]:
    """``(pipeline, filter)`` pairs: the group's pipeline, else the one discover names per source."""
    by_pipeline: dict[str | None, list[RockyAssetEntry]] = {}
    for entry in entries:
        named = entry.source.metadata.get("pipeline")
        pipeline = plan.pipeline or (named if isinstance(named, str) else None)
        by_pipeline.setdefault(pipeline, []).append(entry)
    return [
        (pipeline, flt)
        for pipeline, members in by_pipeline.items()
        for flt in choose_filters(members, plan.index)
    ]


def execute_group(context: dg.AssetExecutionContext, rocky: RockyResource, plan: GroupPlan) -> Iterator[Any]:
    """The body of a group's multi-asset."""
    selected = set(context.selected_asset_keys)
    selected_checks = set(context.selected_asset_check_keys)
    partition = context.partition_key if context.has_partition_key else None
    wanted = [
        e for e in plan.entries if e.key in selected and (partition is None or e.partition == partition)
    ]
    if not wanted:
        context.log.info(f"rocky: nothing of group '{plan.group}' selected for this step")
        return
    emitted: set[dg.AssetKey] = set()
    failed: dict[dg.AssetKey, TableError] = {}
    produced_checks: set[dg.AssetCheckKey] = set()
    problems: list[str] = []
    for pipeline, flt in plan_runs(wanted, plan):
        context.log.info(f"rocky run --filter {flt}" + (f" --pipeline {pipeline}" if pipeline else ""))
        result = rocky.run_streaming(context, flt, pipeline=pipeline)
        yield from _events_for(
            context, result, plan, selected, selected_checks, partition, emitted, failed, produced_checks
        )
        if result.interrupted:
            problems.append(f"the run for {flt} was interrupted")
        elif result.status == "Failure" and not result.errors:
            problems.append(f"the run for {flt} failed without naming a table")
    # Placeholders: a declared, selected check the engine did not evaluate for a table that did not fail.
    for check_key in sorted(selected_checks - produced_checks, key=lambda k: (k.asset_key.path, k.name)):
        if check_key.asset_key in failed:
            continue
        yield dg.AssetCheckResult(
            asset_key=check_key.asset_key,
            check_name=check_key.name,
            passed=True,
            severity=dg.AssetCheckSeverity.WARN,
            description="not evaluated by Rocky in this run (check disabled or table not materialized)",
            metadata={"rocky/placeholder": True},
        )
    if failed or problems:
        lines = [f"{'.'.join(e.asset_key)} ({e.failure_kind}): {e.error}" for e in failed.values()] + problems
        raise dg.Failure(
            description=f"rocky: {len(failed)} table(s) of group '{plan.group}' failed: " + "; ".join(lines),
            metadata={
                "failed_tables": dg.MetadataValue.json(
                    [
                        {
                            "asset_key": e.asset_key,
                            "failure_kind": e.failure_kind,
                            "error": e.error,
                            "cooldown_seconds": e.cooldown_seconds,
                        }
                        for e in failed.values()
                    ]
                ),
                "materialized": len(emitted),
            },
        )


def _events_for(
    context: dg.AssetExecutionContext,
    result: RunResult,
    plan: GroupPlan,
    selected: set[dg.AssetKey],
    selected_checks: set[dg.AssetCheckKey],
    partition: str | None,
    emitted: set[dg.AssetKey],
    failed: dict[dg.AssetKey, TableError],
    produced_checks: set[dg.AssetCheckKey],
) -> Iterator[Any]:
    def mine(engine_key: list[str]) -> RockyAssetEntry | None:
        entry = plan.index.resolve(engine_key)
        if entry is None or entry.key not in selected:
            return None
        if partition is not None and entry.partition != partition:
            return None
        return entry

    for err in result.errors:
        entry = mine(err.asset_key)
        if entry is not None:
            failed[entry.key] = err
            context.log.error(f"rocky: {'.'.join(err.asset_key)} failed ({err.failure_kind}): {err.error}")
    latest: dict[dg.AssetKey, MaterializationInfo] = {}
    for mat in result.materializations:
        entry = mine(mat.asset_key)
        if entry is not None and entry.key not in failed:
            latest[entry.key] = mat  # the engine retried a table: its last report wins
    for key, mat in latest.items():
        if key in emitted:
            continue
        emitted.add(key)
        yield dg.MaterializeResult(asset_key=key, metadata=materialization_metadata(mat, result.run_id))
    for table in result.check_results:
        entry = mine(table.asset_key)
        if entry is None or entry.key in failed:
            continue
        by_name: dict[str, CheckResult] = {c.name: c for c in table.checks}
        for name, check in by_name.items():
            check_key = dg.AssetCheckKey(entry.key, name)
            if check_key not in selected_checks or check_key in produced_checks:
                continue
            produced_checks.add(check_key)
            yield check_result(check_key, check)


def check_result(check_key: dg.AssetCheckKey, check: CheckResult) -> dg.AssetCheckResult:
    warn = dagster_severity(check) == "WARN"
    severity = dg.AssetCheckSeverity.WARN if warn else dg.AssetCheckSeverity.ERROR
    metadata: dict[str, Any] = {"severity": check.severity}
    for name, value in check_metadata(check).items():
        metadata[name] = dg.MetadataValue.json(value) if isinstance(value, dict | list) else value
    return dg.AssetCheckResult(
        asset_key=check_key.asset_key,
        check_name=check_key.name,
        passed=check.passed,
        severity=severity,
        metadata=metadata,
    )
