"""One group's step: pick the ``--filter`` runs for the selected subset and stream their events.

Rules (issue 4, 14): one ``MaterializeResult`` per materialized selected table, one ``AssetCheckResult`` per
selected declared check the run evaluated, never a result for an unselected key or an undeclared check,
never two for one key, no result at all for a check the run did not evaluate (Dagster shows it as not
executed); a failed table gets no materialization and the step fails after everything that did succeed
has been reported (a ``quota-exceeded`` failure asks Dagster for a retry after its cooldown instead).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from dagster_rocky.assets import RockyAssetEntry, RockyAssetIndex
from dagster_rocky.resource import RockyResource
from dagster_rocky.streaming import EventRouting, FailedAsset
from dagster_rocky.translator import component_value
from dagster_rocky.types import RunResult, SourceInfo


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


def routing_for(context: dg.AssetExecutionContext, plan: GroupPlan, partition: str | None) -> EventRouting:
    """Engine keys of the group's tables -> their Dagster keys, limited to the step's selection."""
    keys = {
        engine_key: entry.key
        for engine_key, entry in plan.index.by_engine_key.items()
        if partition is None or entry.partition == partition
    }
    return EventRouting(
        keys=keys,
        selected=set(context.selected_asset_keys),
        checks=set(context.selected_asset_check_keys),
        facts=plan.index.facts,
    )


def execute_group(context: dg.AssetExecutionContext, rocky: RockyResource, plan: GroupPlan) -> Iterator[Any]:
    """The body of a group's multi-asset."""
    selected = set(context.selected_asset_keys)
    partition = context.partition_key if context.has_partition_key else None
    wanted = [
        e for e in plan.entries if e.key in selected and (partition is None or e.partition == partition)
    ]
    if not wanted:
        context.log.info(f"rocky: nothing of group '{plan.group}' selected for this step")
        return
    routing = routing_for(context, plan, partition)
    failed: dict[dg.AssetKey, FailedAsset] = {}
    problems: list[str] = []
    materialized = 0
    for pipeline, flt in plan_runs(wanted, plan):
        context.log.info(f"rocky run --filter {flt}" + (f" --pipeline {pipeline}" if pipeline else ""))
        stream = rocky.run_streaming(context, flt, pipeline=pipeline, routing=routing)
        for event in stream:
            materialized += isinstance(event, dg.MaterializeResult)
            yield event
        failed.update(stream.failed)
        result = stream.result
        problems += run_problems(result, f"the run for {flt}")
        if not result.interrupted and result.status == "Failure" and not result.errors:
            problems.append(f"the run for {flt} failed without naming a table")
    # A selected check the run did not evaluate gets no result: Dagster shows it as not executed, which
    # is the truth (a placeholder "passed" would claim a check that never ran).
    raise_for_failures(failed, problems, f"group '{plan.group}'", materialized)


def run_problems(result: RunResult, what: str) -> list[str]:
    """What went wrong in a run beyond any one table or model, in the engine's words.

    An error with an empty ``asset_key`` is about the whole run (an ``abort`` hook at
    ``pipeline_complete``, a failed state upload, checks a hook stopped): the run is a ``Failure`` or
    ``PartialFailure`` even though every table may have materialized, so the step must fail with it. A
    model withheld because an upstream model failed (``contained``) gets no materialization and no
    error of its own: its ``unblock_hint`` is what to do.
    """
    problems = [f"{what} was interrupted"] if result.interrupted else []
    problems += [f"{what}: {err.error} ({err.failure_kind})" for err in result.errors if not err.asset_key]
    problems += [
        f"{c.model} was not run (blocked by {', '.join(c.blocked_by)}): {c.unblock_hint}"
        for c in result.contained
    ]
    return problems


#: what a quota-exceeded failure waits before the retry when the engine names no cooldown
QUOTA_COOLDOWN_DEFAULT_SECONDS = 300
QUOTA_EXCEEDED = "quota-exceeded"


def raise_for_failures(
    failed: dict[dg.AssetKey, FailedAsset], problems: list[str], what: str, materialized: int
) -> None:
    """Fail the step after everything that succeeded was reported.

    A ``quota-exceeded`` failure (a tripped circuit breaker) raises ``dg.RetryRequested`` waiting the
    engine's cooldown (the largest one named, else 300 s): trying again later is the fix, and Dagster
    reschedules the step itself instead of leaving a failed run for a human.
    """
    if not failed and not problems:
        return
    quota = [f for f in failed.values() if f.failure_kind == QUOTA_EXCEEDED]
    if quota:
        cooldowns = [f.cooldown_seconds for f in quota if f.cooldown_seconds is not None]
        wait = max(cooldowns) if cooldowns else QUOTA_COOLDOWN_DEFAULT_SECONDS
        raise dg.RetryRequested(max_retries=1, seconds_to_wait=wait)
    lines = [f"{f.key.to_user_string()} ({f.failure_kind}): {f.error}" for f in failed.values()] + problems
    head = f"rocky: {len(failed)} asset(s) of {what} failed: " if failed else f"rocky: {what} failed: "
    raise dg.Failure(
        description=head + "; ".join(lines),
        metadata={
            "failed_assets": dg.MetadataValue.json(
                [
                    {
                        "asset_key": list(f.key.path),
                        "failure_kind": f.failure_kind,
                        "error": f.error,
                        "cooldown_seconds": f.cooldown_seconds,
                    }
                    for f in failed.values()
                ]
            ),
            "materialized": materialized,
        },
    )
