"""rocky.toml: ``${VAR}`` substitution, typed pydantic models and loading (CONTRACT section 1).

``load_config(path)`` is the one entry point; it raises ``ConfigError`` naming the file, the key and the
fix. ``rocky_engine.config.validation`` adds the cross-reference checks behind ``rocky validate``.
"""

from __future__ import annotations

from rocky_engine.config.adapters import (
    ADAPTER_TYPES,
    AdapterConfig,
    DuckDbAdapterConfig,
    FivetranAdapterConfig,
    PostgresAdapterConfig,
    RetryConfig,
    SparkAdapterConfig,
)
from rocky_engine.config.checks import (
    Assertion,
    ChecksConfig,
    ColumnMatchCheck,
    CustomCheck,
    FreshnessCheck,
    NullRateCheck,
)
from rocky_engine.config.connectors import ConnectorConfig, ConnectorLimits, ConnectorTarget
from rocky_engine.config.envsubst import substitute
from rocky_engine.config.hooks import HOOK_EVENTS, CommandHook, HookConfig, WebhookHook
from rocky_engine.config.loader import load_config
from rocky_engine.config.model import RockyConfig
from rocky_engine.config.pipelines import (
    PIPELINE_TYPES,
    AdapterRef,
    DiscoveryRef,
    ExecutionConfig,
    Governance,
    LoadPipeline,
    LoadTarget,
    MetadataColumn,
    PipelineBase,
    PipelineConfig,
    PipelineSchedule,
    QualityPipeline,
    QualityTable,
    ReplicationPipeline,
    ReplicationSource,
    ReplicationTarget,
    ScheduleRetry,
    SchemaPattern,
    SnapshotPipeline,
    TableRef,
    TransformationPipeline,
    TransformationTarget,
)
from rocky_engine.config.sections import (
    FreshnessDefaults,
    IdempotencyConfig,
    ScheduleDefaults,
    StateConfig,
    StateRetry,
)

__all__ = [
    "ADAPTER_TYPES",
    "HOOK_EVENTS",
    "PIPELINE_TYPES",
    "AdapterConfig",
    "AdapterRef",
    "Assertion",
    "ChecksConfig",
    "ColumnMatchCheck",
    "CommandHook",
    "ConnectorConfig",
    "ConnectorLimits",
    "ConnectorTarget",
    "CustomCheck",
    "DiscoveryRef",
    "DuckDbAdapterConfig",
    "ExecutionConfig",
    "FivetranAdapterConfig",
    "FreshnessCheck",
    "FreshnessDefaults",
    "Governance",
    "HookConfig",
    "IdempotencyConfig",
    "LoadPipeline",
    "LoadTarget",
    "MetadataColumn",
    "NullRateCheck",
    "PipelineBase",
    "PipelineConfig",
    "PipelineSchedule",
    "PostgresAdapterConfig",
    "QualityPipeline",
    "QualityTable",
    "ReplicationPipeline",
    "ReplicationSource",
    "ReplicationTarget",
    "RetryConfig",
    "RockyConfig",
    "ScheduleDefaults",
    "ScheduleRetry",
    "SchemaPattern",
    "SnapshotPipeline",
    "SparkAdapterConfig",
    "StateConfig",
    "StateRetry",
    "TableRef",
    "TransformationPipeline",
    "TransformationTarget",
    "WebhookHook",
    "load_config",
    "substitute",
]
