"""Discovery adapters: which source schemas (and tables) a replication pipeline sees.

``[source.discovery] adapter`` names the adapter that answers; its *type* picks the implementation. A
warehouse adapter (duckdb, postgres) lists the schemas of the source catalog in one catalog query; a
warehouse has no sync clock, so its sources report ``last_sync_at = None``. Other types (``fivetran``)
are registered in ``DISCOVERY_IMPLEMENTATIONS`` and constructed as ``cls(config, adapter_name)``.

Schemas that carry the pattern's prefix but do not fit it come back in ``misfits``; callers warn about
each one (a source is never dropped silently). A source the adapter tried and failed to read goes to
``failed_sources``: consumers must not treat it as deleted.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from rocky_engine.errors import ConfigError, UsageError
from rocky_engine.replication.schema_pattern import ComponentValue, Misfit, ParsedSchema, SchemaPattern

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.config import RockyConfig
    from rocky_engine.config.pipelines import ReplicationPipeline

#: discovery adapter type -> "module:Class"; the class is built as ``cls(config, adapter_name)``
DISCOVERY_IMPLEMENTATIONS: dict[str, str] = {
    "fivetran": "rocky_engine.adapters.fivetran:FivetranDiscovery",
}


@dataclass(frozen=True, slots=True)
class DiscoveredTable:
    name: str
    row_count: int | None = None


@dataclass(frozen=True)
class DiscoveredSource:
    """One source schema that fits the pattern, with its tables."""

    id: str
    schema: str
    components: dict[str, ComponentValue]
    source_type: str
    last_sync_at: datetime | None = None
    tables: tuple[DiscoveredTable, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FailedSource:
    """A source the adapter tried and failed to read (``error_class``: transient|timeout|rate_limit|auth|
    unknown)."""

    id: str
    schema: str
    source_type: str
    error_class: str
    message: str
    cooldown_seconds: int | None = None


@dataclass
class DiscoverOutcome:
    sources: list[DiscoveredSource] = field(default_factory=list)
    failed_sources: list[FailedSource] = field(default_factory=list)
    misfits: list[Misfit] = field(default_factory=list)

    def fit(self, pattern: SchemaPattern, schema: str) -> ParsedSchema | None:
        """``schema`` parsed by ``pattern``; None when it does not fit (a near miss goes to ``misfits``)."""
        parsed = pattern.parse(schema)
        if isinstance(parsed, Misfit):
            self.misfits.append(parsed)
            return None
        return parsed


class DiscoveryAdapter(Protocol):
    """Answers "which sources exist" for one replication pipeline."""

    def discover(self, pipeline: ReplicationPipeline) -> DiscoverOutcome: ...

    def close(self) -> None: ...


class WarehouseDiscovery:
    """Lists the schemas of the source warehouse that fit the pipeline's schema pattern."""

    def __init__(self, adapter: WarehouseAdapter, *, owns_adapter: bool = False) -> None:
        self.adapter = adapter
        self._owns = owns_adapter

    def discover(self, pipeline: ReplicationPipeline) -> DiscoverOutcome:
        from rocky_engine.replication.catalog import list_tables

        pattern = SchemaPattern.from_config(pipeline.source.schema_pattern)
        catalog = pipeline.source.catalog or self.adapter.catalog
        if catalog != self.adapter.catalog and self.adapter.type == "postgres":
            raise ConfigError(
                f"source catalog '{catalog}' is not the database of adapter '{self.adapter.name}' "
                f"('{self.adapter.catalog}')",
                key="source.catalog",
                hint="a PostgreSQL adapter reads one database: point [source] at that database's adapter",
            )
        by_schema: dict[str, list[DiscoveredTable]] = {}
        for table in list_tables(self.adapter, catalog):
            by_schema.setdefault(table.schema, []).append(DiscoveredTable(table.name, table.row_count))
        return build_outcome(pattern, by_schema, self.adapter.type)

    def close(self) -> None:
        if self._owns:
            self.adapter.close()


def build_outcome(
    pattern: SchemaPattern,
    tables_by_schema: dict[str, list[DiscoveredTable]],
    source_type: str,
    last_sync: Callable[[str], datetime | None] | None = None,
) -> DiscoverOutcome:
    """Match schema names against ``pattern``; shared by every discovery implementation."""
    outcome = DiscoverOutcome()
    for schema in sorted(tables_by_schema):
        parsed = outcome.fit(pattern, schema)
        if parsed is not None:
            outcome.sources.append(_source(parsed, tables_by_schema[schema], source_type, last_sync))
    return outcome


def _source(
    parsed: ParsedSchema,
    tables: list[DiscoveredTable],
    source_type: str,
    last_sync: Callable[[str], datetime | None] | None,
) -> DiscoveredSource:
    return DiscoveredSource(
        id=parsed.schema,
        schema=parsed.schema,
        components=parsed.components,
        source_type=source_type,
        last_sync_at=last_sync(parsed.schema) if last_sync is not None else None,
        tables=tuple(sorted(tables, key=lambda t: t.name)),
    )


def open_discovery(
    config: RockyConfig,
    pipeline: ReplicationPipeline,
    *,
    source_adapter: WarehouseAdapter | None = None,
    read_only: bool = False,
) -> DiscoveryAdapter:
    """The discovery adapter of ``pipeline``: ``[source.discovery] adapter``, else the source warehouse.

    ``source_adapter`` (already open) is reused when discovery goes to the source warehouse itself.
    """
    from rocky_engine.adapters.registry import open_adapter

    name = pipeline.source.discovery.adapter if pipeline.source.discovery else pipeline.source.adapter
    adapter_type = config.adapter(name).type
    target = DISCOVERY_IMPLEMENTATIONS.get(adapter_type)
    if target is not None:
        module_name, _, cls_name = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            raise UsageError(f"{adapter_type} discovery is not supported by this build") from exc
        factory: Callable[[RockyConfig, str], DiscoveryAdapter] = getattr(module, cls_name)
        return factory(config, name)
    if source_adapter is not None and name == source_adapter.name:
        return WarehouseDiscovery(source_adapter)
    return WarehouseDiscovery(open_adapter(config, name, read_only=read_only), owns_adapter=True)
