"""Pydantic models of the engine's JSON documents (CONTRACT sections 3, 4 and 8, ``rocky dag`` and the
``rocky.events`` lines).

Re-exported from the engine's wire module (``rocky_engine.wire``), the one declaration of the format that
the engine builds its output from: a field renamed on one side is renamed on both. Unknown fields are
ignored, so a newer engine that adds fields keeps working; optional fields the engine omits take their
documented defaults.
"""

from __future__ import annotations

from rocky_engine.wire.checks import (
    AggregateAssertion,
    AnyCheck,
    AssertionCheck,
    CheckResult,
    ColumnMatchCheck,
    CustomCheck,
    FreshnessCheck,
    NullRateCheck,
    RowCountCheck,
    RowCountRangeAssertion,
    TableCheckResult,
    UnknownCheck,
)
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
from rocky_engine.wire.discover import (
    DiscoverChecks,
    DiscoverResult,
    ErrorClass,
    FailedSourceOutput,
    FreshnessCheckConfig,
    SourceInfo,
    TableInfo,
)
from rocky_engine.wire.doctor import DoctorCheck, DoctorResult
from rocky_engine.wire.events import EVENTS_TARGET, EventAnomaly, EventCheck, EventDrift, RunEvent
from rocky_engine.wire.history import (
    HistoryResult,
    HistoryRun,
    HistoryRunModel,
    ModelExecutionRow,
    ModelHistoryResult,
)
from rocky_engine.wire.run import (
    AnomalyInfo,
    ContainedInfo,
    DriftAction,
    DriftInfo,
    ExecutionSummary,
    MaterializationInfo,
    MaterializationMetadata,
    PermissionsInfo,
    RunResult,
    RunStatus,
    TableError,
)

__all__ = [
    "EVENTS_TARGET",
    "AggregateAssertion",
    "AnomalyInfo",
    "AnyCheck",
    "AssertionCheck",
    "CheckResult",
    "ColumnMatchCheck",
    "ContainedInfo",
    "CustomCheck",
    "DagAssertion",
    "DagCheck",
    "DagEdge",
    "DagFreshness",
    "DagNode",
    "DagResult",
    "DagSource",
    "DagStrategy",
    "DagSummary",
    "DagTarget",
    "DiscoverChecks",
    "DiscoverResult",
    "DoctorCheck",
    "DoctorResult",
    "DriftAction",
    "DriftInfo",
    "ErrorClass",
    "EventAnomaly",
    "EventCheck",
    "EventDrift",
    "ExecutionSummary",
    "FailedSourceOutput",
    "FreshnessCheck",
    "FreshnessCheckConfig",
    "HistoryResult",
    "HistoryRun",
    "HistoryRunModel",
    "MaterializationInfo",
    "MaterializationMetadata",
    "ModelExecutionRow",
    "ModelHistoryResult",
    "NullRateCheck",
    "PermissionsInfo",
    "RowCountCheck",
    "RowCountRangeAssertion",
    "RunEvent",
    "RunResult",
    "RunStatus",
    "SourceInfo",
    "TableCheckResult",
    "TableError",
    "TableInfo",
    "UnknownCheck",
]
