"""One evaluation of ``rocky_source_sensor``: discover, compare with the cursor, decide, report.

Order of a tick (the seed's "What one tick does"): ``rocky discover``; failed sources are warned about and
keep their cursor; each healthy source whose parsed ``last_sync_at`` is newer than its cursor triggers;
triggered sources become requests (per source or per group, partitioned in tenant mode); the backlog cap
suppresses a request without freezing the cursor; hooks fire last, after every decision.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import dagster as dg

from dagster_rocky.sensor_contexts import BacklogCap, EmitContext, FailedSourcesContext, SkipContext
from dagster_rocky.tenancy import strip_tenant, tenant_of
from dagster_rocky.translator import RockyDagsterTranslator
from dagster_rocky.types import DiscoverResult, SourceInfo

Granularity = Literal["per_source", "per_group"]

SENSOR_TAG = "rocky/sensor"
SOURCE_TAG = "rocky/source_id"
GROUP_TAG = "rocky/group"
SYNC_TAG = "rocky/sync_at"

#: above this many candidate requests the backlog cap counts in-flight runs with one query, not one each
_BULK_COUNT_THRESHOLD = 64


@dataclass(frozen=True)
class TickConfig:
    """Everything a tick needs besides the context and the resource (fixed at definition time)."""

    name: str
    granularity: Granularity
    translator: RockyDagsterTranslator
    target: Any
    backlog_cap: BacklogCap | None = None
    on_run_request_emitted: Callable[[EmitContext], None] | None = None
    on_failed_sources: Callable[[FailedSourcesContext], None] | None = None
    on_skip: Callable[[SkipContext], None] | None = None
    tenant_component: str | None = None
    tenant_partitions_name: str | None = None
    sync_partitions_from_discover: bool = True
    pipeline: str | None = None


@dataclass
class _Pending:
    """A request before the backlog cap: the sources it stands for."""

    request: dg.RunRequest
    sources: list[SourceInfo] = field(default_factory=list)


def parse_cursor(raw: str | None, log: Any) -> tuple[dict[str, str], dict[str, datetime]]:
    """The cursor as stored strings and as parsed datetimes; an unreadable cursor starts over."""
    if not raw:
        return {}, {}
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError:
        log.warning("rocky_source_sensor: the cursor is not JSON; starting from an empty cursor")
        return {}, {}
    if not isinstance(doc, dict):
        log.warning("rocky_source_sensor: the cursor is not a JSON object; starting from an empty cursor")
        return {}, {}
    stored: dict[str, str] = {}
    parsed: dict[str, datetime] = {}
    for source_id, value in doc.items():
        if not isinstance(value, str):
            continue
        try:
            parsed[str(source_id)] = as_aware(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            continue  # an entry we cannot read re-triggers once, which is the safe side
        stored[str(source_id)] = value
    return stored, parsed


def as_aware(moment: datetime) -> datetime:
    """Naive timestamps are UTC (what the engine writes); aware ones compare across offsets."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def target_keys(context: dg.SensorEvaluationContext, target: Any) -> set[dg.AssetKey] | None:
    """The asset keys the sensor's target selects, when the repository is known; None: no filtering."""
    repo = context.repository_def
    if repo is None or target is None:
        return None
    try:
        if isinstance(target, dg.AssetSelection):  # checked first: a selection is also a tuple
            return set(target.resolve(repo.asset_graph))
        if isinstance(target, dg.AssetsDefinition):
            return set(target.keys)
        if isinstance(target, list) and all(isinstance(t, dg.AssetsDefinition) for t in target):
            return {k for t in target for k in t.keys}
        return set(dg.AssetSelection.from_coercible(target).resolve(repo.asset_graph))
    except Exception:  # a job target or an unresolvable selection: Dagster validates the request itself
        return None


def evaluate_tick(context: dg.SensorEvaluationContext, rocky: Any, cfg: TickConfig) -> dg.SensorResult:
    """Run one tick and return its ``SensorResult`` (requests, cursor, partition additions)."""
    log = context.log
    discover: DiscoverResult = rocky.discover(cfg.pipeline) if cfg.pipeline else rocky.discover()
    stored, previous = parse_cursor(context.cursor, log)
    failed = discover.failed_sources
    failed_ids = {f.id for f in failed}
    new_cursor: dict[str, str] = {}
    if failed:
        log.warning(
            f"rocky_source_sensor '{cfg.name}': discover could not read {len(failed)} source(s); their "
            f"cursor is kept and they are re-evaluated next tick: {', '.join(sorted(failed_ids))}"
        )
        for source_id in failed_ids:
            if source_id in stored:
                new_cursor[source_id] = stored[source_id]

    triggered: list[tuple[SourceInfo, datetime]] = []
    for source in discover.sources:
        if source.id in failed_ids:
            continue
        if source.last_sync_at is None:
            if source.id in stored:
                new_cursor[source.id] = stored[source.id]
            continue
        sync = as_aware(source.last_sync_at)
        before = previous.get(source.id)
        if before is None or sync > before:
            triggered.append((source, sync))
            new_cursor[source.id] = sync.isoformat()
        else:
            new_cursor[source.id] = stored[source.id]

    tenant_mode = cfg.tenant_component is not None and cfg.tenant_partitions_name is not None
    partition_requests: list[dg.AddDynamicPartitionsRequest] = []
    partition_of: dict[str, str] = {}
    if tenant_mode:
        triggered, partition_requests, partition_of = _tenant_filter(
            context, discover, triggered, stored, new_cursor, cfg
        )

    keys_in_target = target_keys(context, cfg.target)
    pending = _build_requests(triggered, partition_of, keys_in_target, cfg)
    emitted = _apply_backlog_cap(context, pending, cfg)

    # Hooks are observability, never policy: they run after every decision above and cannot change it.
    if failed and cfg.on_failed_sources is not None:
        _call_hook(
            log,
            "on_failed_sources",
            cfg.on_failed_sources,
            FailedSourcesContext(failed_sources=list(failed), sensor_context=context),
        )
    if cfg.on_run_request_emitted is not None:
        for item in emitted:
            _call_hook(
                log,
                "on_run_request_emitted",
                cfg.on_run_request_emitted,
                EmitContext(
                    run_request=item.request,
                    sources=list(item.sources),
                    granularity=cfg.granularity,
                    sensor_context=context,
                ),
            )
    cursor = json.dumps(new_cursor, separators=(",", ":"), sort_keys=True)
    if emitted:
        return dg.SensorResult(
            run_requests=[p.request for p in emitted],
            cursor=cursor,
            dynamic_partitions_requests=partition_requests or None,
        )
    reason = _skip_reason(discover, triggered, pending)
    if cfg.on_skip is not None:
        _call_hook(
            log,
            "on_skip",
            cfg.on_skip,
            SkipContext(reason=reason, cursor_size=len(new_cursor), sensor_context=context),
        )
    return dg.SensorResult(
        skip_reason=_SKIP_TEXT[reason],
        cursor=cursor,
        dynamic_partitions_requests=partition_requests or None,
    )


_SKIP_TEXT = {
    "no_sources": "rocky discover returned no sources",
    "no_new_syncs": "no source reported a sync newer than the cursor",
    "no_assets": "the sources with new syncs have no assets in the sensor's target",
    "backlog_cap": "every request was suppressed by the backlog cap",
}


def _skip_reason(
    discover: DiscoverResult, triggered: list[tuple[SourceInfo, datetime]], pending: list[_Pending]
) -> str:
    if not discover.sources:
        return "no_sources"
    if not triggered:
        return "no_new_syncs"
    if not pending:
        return "no_assets"
    return "backlog_cap"


def _tenant_filter(
    context: dg.SensorEvaluationContext,
    discover: DiscoverResult,
    triggered: list[tuple[SourceInfo, datetime]],
    stored: dict[str, str],
    new_cursor: dict[str, str],
    cfg: TickConfig,
) -> tuple[list[tuple[SourceInfo, datetime]], list[dg.AddDynamicPartitionsRequest], dict[str, str]]:
    """Attach partition keys; add new tenants; roll back the cursor of sources that cannot be emitted."""
    assert cfg.tenant_partitions_name is not None
    existing = set(context.instance.get_dynamic_partitions(cfg.tenant_partitions_name))
    to_add: list[str] = []
    if cfg.sync_partitions_from_discover:
        for source in discover.sources:
            tenant = tenant_of(source, cfg.tenant_component, cfg.translator)
            if tenant and tenant not in existing and tenant not in to_add:
                to_add.append(tenant)
    available = existing | set(to_add)
    kept: list[tuple[SourceInfo, datetime]] = []
    partition_of: dict[str, str] = {}
    for source, sync in triggered:
        tenant = tenant_of(source, cfg.tenant_component, cfg.translator)
        if tenant is None or tenant not in available:
            why = "has no tenant value" if tenant is None else f"tenant '{tenant}' is not a partition yet"
            context.log.warning(
                f"rocky_source_sensor '{cfg.name}': source {source.id} {why}; not emitted, cursor kept"
            )
            # Roll back: the next tick must see this sync as new again.
            if source.id in stored:
                new_cursor[source.id] = stored[source.id]
            else:
                new_cursor.pop(source.id, None)
            continue
        partition_of[source.id] = tenant
        kept.append((source, sync))
    requests = [dg.AddDynamicPartitionsRequest(cfg.tenant_partitions_name, to_add)] if to_add else []
    return kept, requests, partition_of


def _source_keys(
    source: SourceInfo, cfg: TickConfig, keys_in_target: set[dg.AssetKey] | None
) -> list[dg.AssetKey]:
    view = strip_tenant(source, cfg.tenant_component) if cfg.tenant_component else source
    keys = cfg.translator.keys_by_table(view)
    if keys_in_target is not None:
        keys = [k for k in keys if k in keys_in_target]
    return keys


def _build_requests(
    triggered: list[tuple[SourceInfo, datetime]],
    partition_of: Mapping[str, str],
    keys_in_target: set[dg.AssetKey] | None,
    cfg: TickConfig,
) -> list[_Pending]:
    pending: list[_Pending] = []
    if cfg.granularity == "per_source":
        for source, sync in triggered:
            keys = _source_keys(source, cfg, keys_in_target)
            if not keys:
                continue
            iso = sync.isoformat()
            request = dg.RunRequest(
                run_key=f"{source.id}-{iso}",
                asset_selection=keys,
                tags={SENSOR_TAG: cfg.name, SOURCE_TAG: source.id, SYNC_TAG: iso},
                partition_key=partition_of.get(source.id),
            )
            pending.append(_Pending(request, [source]))
        return pending

    buckets: dict[tuple[str, str | None], list[tuple[SourceInfo, datetime, list[dg.AssetKey]]]] = {}
    for source, sync in triggered:
        keys = _source_keys(source, cfg, keys_in_target)
        if not keys:
            continue
        view = strip_tenant(source, cfg.tenant_component) if cfg.tenant_component else source
        group = cfg.translator.get_group_name(view)
        buckets.setdefault((group, partition_of.get(source.id)), []).append((source, sync, keys))
    partitions_per_group: dict[str, int] = {}
    for group, _partition in buckets:
        partitions_per_group[group] = partitions_per_group.get(group, 0) + 1
    for (group, partition), members in buckets.items():
        latest = max(sync for _, sync, _ in members).isoformat()
        run_key = f"{group}-{latest}"
        if partition is not None and partitions_per_group[group] > 1:
            run_key = f"{group}-{partition}-{latest}"  # one group, several tenants: one run each
        keys = list(dict.fromkeys(k for _, _, ks in members for k in ks))
        request = dg.RunRequest(
            run_key=run_key,
            asset_selection=keys,
            tags={SENSOR_TAG: cfg.name, GROUP_TAG: group, SYNC_TAG: latest},
            partition_key=partition,
        )
        pending.append(_Pending(request, [s for s, _, _ in members]))
    return pending


def _apply_backlog_cap(
    context: dg.SensorEvaluationContext, pending: list[_Pending], cfg: TickConfig
) -> list[_Pending]:
    cap = cfg.backlog_cap
    if cap is None or not pending:
        return pending
    scope = dict(cap.scope_tags or {})
    statuses = list(cap.statuses)
    instance = context.instance
    counts: dict[str, int] = {}
    bulk = len(pending) > _BULK_COUNT_THRESHOLD
    if bulk:
        # One query for the whole tick instead of one per request: the same count, bounded latency.
        runs = instance.get_runs(
            filters=dg.RunsFilter(tags={SENSOR_TAG: cfg.name, **scope}, statuses=statuses)
        )
        for run in runs:
            value = run.tags.get(cap.tag_key)
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
    kept: list[_Pending] = []
    for item in pending:
        value = item.request.tags.get(cap.tag_key)
        if value is None:
            kept.append(item)  # this granularity does not carry the capped tag
            continue
        if value not in counts and bulk:
            counts[value] = 0
        elif value not in counts:
            in_flight = instance.get_runs(
                filters=dg.RunsFilter(
                    tags={SENSOR_TAG: cfg.name, cap.tag_key: value, **scope}, statuses=statuses
                ),
                limit=cap.max_in_flight + 1,
            )
            counts[value] = len(in_flight)
        if counts[value] >= cap.max_in_flight:
            context.log.info(
                f"rocky_source_sensor '{cfg.name}': {cap.tag_key}={value} has {counts[value]} run(s) in "
                f"flight (cap {cap.max_in_flight}); request {item.request.run_key} suppressed, "
                "cursor advanced"
            )
            continue
        counts[value] += 1  # a request emitted now is in flight for the next one with the same value
        kept.append(item)
    return kept


def _call_hook(log: Any, name: str, hook: Callable[[Any], None], payload: Any) -> None:
    try:
        hook(payload)
    except Exception as exc:  # best-effort by contract: a hook never blocks an emit
        log.warning(f"rocky_source_sensor hook {name} raised {type(exc).__name__}: {exc}")
