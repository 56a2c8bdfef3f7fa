"""dagster-rocky: run the Rocky engine from Dagster.

The curated public face. ``RockyResource`` drives the ``rocky`` CLI (``run_streaming``: its events as they
happen); ``load_rocky_assets``, ``build_rocky_assets`` and ``RockyComponent`` turn discovered tables into
assets, ``specs_from_dag`` / ``build_rocky_model_assets`` (and the component) the models of ``rocky dag``;
``build_rocky_schedule``, ``rocky_eager_automation``, ``rocky_cron_automation`` and ``rocky_source_sensor``
decide when they run.
"""

from __future__ import annotations

from dagster_rocky.assets import build_rocky_assets, load_rocky_assets, specs_from_discover
from dagster_rocky.automation import rocky_cron_automation, rocky_eager_automation
from dagster_rocky.component import RockyComponent
from dagster_rocky.models import build_rocky_model_assets, specs_from_dag
from dagster_rocky.resource import RockyResource
from dagster_rocky.schedules import build_rocky_schedule
from dagster_rocky.sensor import (
    BacklogCap,
    EmitContext,
    FailedSourcesContext,
    SkipContext,
    rocky_source_sensor,
)
from dagster_rocky.streaming import EventRouting, RockyRunStream
from dagster_rocky.translator import RockyDagsterTranslator
from dagster_rocky.types import (
    CheckResult,
    DagNode,
    DagResult,
    DiscoverResult,
    FailedSourceOutput,
    MaterializationInfo,
    RunEvent,
    RunResult,
    SourceInfo,
    TableCheckResult,
    TableError,
    TableInfo,
)

__all__ = [
    "BacklogCap",
    "CheckResult",
    "DagNode",
    "DagResult",
    "DiscoverResult",
    "EmitContext",
    "EventRouting",
    "FailedSourceOutput",
    "FailedSourcesContext",
    "MaterializationInfo",
    "RockyComponent",
    "RockyDagsterTranslator",
    "RockyResource",
    "RockyRunStream",
    "RunEvent",
    "RunResult",
    "SkipContext",
    "SourceInfo",
    "TableCheckResult",
    "TableError",
    "TableInfo",
    "build_rocky_assets",
    "build_rocky_model_assets",
    "build_rocky_schedule",
    "load_rocky_assets",
    "rocky_cron_automation",
    "rocky_eager_automation",
    "rocky_source_sensor",
    "specs_from_dag",
    "specs_from_discover",
]
