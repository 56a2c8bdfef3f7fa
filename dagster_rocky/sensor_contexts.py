"""The sensor's hook context types and ``BacklogCap``: what ``rocky_source_sensor``'s callers pass and get.

Their own module so that the builder (``sensor.py``) and one tick's decisions (``sensor_tick.py``) both
depend on them without depending on each other. ``dagster_rocky.sensor`` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dagster as dg

from dagster_rocky.types import FailedSourceOutput, SourceInfo

#: the run statuses a backlog cap counts by default: every status of a run that has not finished
IN_FLIGHT_STATUSES: tuple[dg.DagsterRunStatus, ...] = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
)

@dataclass(frozen=True)
class BacklogCap:
    """Suppress a request while ``max_in_flight`` runs of this sensor already carry its ``tag_key`` value.

    Args:
        tag_key: ``rocky/source_id`` (per_source) or ``rocky/group`` (per_group), or any tag on the request.
        max_in_flight: suppress when the in-flight count is at or above this.
        statuses: the run statuses counted as in flight.
        scope_tags: extra exact-match tags narrowing the count.
    """

    tag_key: str
    max_in_flight: int
    statuses: Sequence[dg.DagsterRunStatus] = IN_FLIGHT_STATUSES
    scope_tags: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError(f"BacklogCap.max_in_flight must be at least 1 (got {self.max_in_flight})")
        if not self.tag_key:
            raise ValueError("BacklogCap.tag_key must name a run tag, e.g. 'rocky/group'")


@dataclass(frozen=True)
class EmitContext:
    """Passed to ``on_run_request_emitted`` once per request Dagster will be asked to launch."""

    run_request: dg.RunRequest
    sources: list[SourceInfo]
    granularity: str
    sensor_context: dg.SensorEvaluationContext


@dataclass(frozen=True)
class FailedSourcesContext:
    """Passed to ``on_failed_sources`` when discover reported sources it could not read."""

    failed_sources: list[FailedSourceOutput]
    sensor_context: dg.SensorEvaluationContext


@dataclass(frozen=True)
class SkipContext:
    """Passed to ``on_skip`` when a tick emits nothing.

    ``reason`` is one of ``no_sources``, ``no_new_syncs``, ``no_assets``, ``backlog_cap``.
    """

    reason: str
    cursor_size: int
    sensor_context: dg.SensorEvaluationContext
