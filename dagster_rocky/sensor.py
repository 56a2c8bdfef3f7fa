"""``rocky_source_sensor``: start Rocky runs when an upstream connector finishes a sync.

Each tick polls ``rocky discover`` and emits a ``RunRequest`` for every source whose ``last_sync_at`` is newer
than its cursor entry (see :mod:`dagster_rocky.sensor_tick` for one tick's decisions). This module holds the
public surface: the builder, and (re-exported from :mod:`dagster_rocky.sensor_contexts`) ``BacklogCap`` and
the three hook context types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dagster as dg

from dagster_rocky.resource import RockyResource
from dagster_rocky.sensor_contexts import (
    IN_FLIGHT_STATUSES,
    BacklogCap,
    EmitContext,
    FailedSourcesContext,
    SkipContext,
)
from dagster_rocky.sensor_tick import Granularity, TickConfig, evaluate_tick
from dagster_rocky.translator import RockyDagsterTranslator

_GRANULARITIES = ("per_source", "per_group")


def rocky_source_sensor(
    *,
    rocky_resource: str | RockyResource = "rocky",
    target: Any,
    granularity: Granularity = "per_source",
    translator: RockyDagsterTranslator | None = None,
    name: str = "rocky_source_sensor",
    minimum_interval_seconds: int = 300,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    backlog_cap: BacklogCap | None = None,
    on_run_request_emitted: Callable[[EmitContext], None] | None = None,
    on_failed_sources: Callable[[FailedSourcesContext], None] | None = None,
    on_skip: Callable[[SkipContext], None] | None = None,
    tenant_component: str | None = None,
    tenant_partitions_name: str | None = None,
    sync_partitions_from_discover: bool = True,
    pipeline: str | None = None,
) -> dg.SensorDefinition:
    """A sensor that emits a ``RunRequest`` per source (or group) with a newer ``last_sync_at``.

    Args:
        rocky_resource: the resource key resolved at evaluation time (recommended), or a
            ``RockyResource`` instance captured now (legacy form).
        target: the assets the requests materialize (selection, assets definition, or keys).
        granularity: ``per_source`` (one run per source) or ``per_group`` (one per Dagster group).
        translator: the translator of the assets, so the requested keys match them.
        backlog_cap: opt-in suppression while too many of this sensor's runs are in flight.
        on_run_request_emitted / on_failed_sources / on_skip: best-effort observability hooks.
        tenant_component / tenant_partitions_name: emit partitioned requests (both or neither).
        sync_partitions_from_discover: add new tenant values to the dynamic partitions.
        pipeline: the replication pipeline to discover (when the project has several).

    Raises:
        ValueError: a half-configured tenant mode, an unknown granularity, or a bad resource argument.
    """
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be 'per_source' or 'per_group' (got {granularity!r})")
    if (tenant_component is None) != (tenant_partitions_name is None):
        missing = "tenant_partitions_name" if tenant_partitions_name is None else "tenant_component"
        raise ValueError(
            f"rocky_source_sensor: tenant mode needs both tenant_component and tenant_partitions_name; "
            f"{missing} is missing"
        )
    if not isinstance(rocky_resource, str | RockyResource):
        raise ValueError(
            "rocky_resource must be a resource key (str) or a RockyResource instance "
            f"(got {type(rocky_resource).__name__})"
        )
    cfg = TickConfig(
        name=name,
        granularity=granularity,
        translator=translator or RockyDagsterTranslator(),
        target=target,
        backlog_cap=backlog_cap,
        on_run_request_emitted=on_run_request_emitted,
        on_failed_sources=on_failed_sources,
        on_skip=on_skip,
        tenant_component=tenant_component,
        tenant_partitions_name=tenant_partitions_name,
        sync_partitions_from_discover=sync_partitions_from_discover,
        pipeline=pipeline,
    )
    description = (
        "Polls `rocky discover` and starts a run for each "
        + ("source" if granularity == "per_source" else "group")
        + " whose upstream connector finished a newer sync."
    )

    if isinstance(rocky_resource, str):
        key = rocky_resource

        @dg.sensor(
            name=name,
            target=target,
            minimum_interval_seconds=minimum_interval_seconds,
            default_status=default_status,
            required_resource_keys={key},
            description=description,
        )
        def _keyed(context: dg.SensorEvaluationContext, **resources: Any) -> dg.SensorResult:
            # Direct invocation passes required resources as keyword arguments; the daemon does not.
            rocky = resources[key] if key in resources else getattr(context.resources, key)
            return evaluate_tick(context, rocky, cfg)

        return _keyed

    captured = rocky_resource

    @dg.sensor(
        name=name,
        target=target,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=description,
    )
    def _captured(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        return evaluate_tick(context, captured, cfg)

    return _captured


__all__ = [
    "IN_FLIGHT_STATUSES",
    "BacklogCap",
    "EmitContext",
    "FailedSourcesContext",
    "SkipContext",
    "rocky_source_sensor",
]
