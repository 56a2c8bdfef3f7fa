"""Discovery adapters: which source schemas (and tables) a replication pipeline sees.

``[source.discovery] adapter`` names the adapter that answers; its type's plugin picks the
implementation. A warehouse adapter (duckdb, postgres) lists the schemas of the source catalog in one
catalog query. Its sources' ``last_sync_at`` is the newest value of the pipeline's ``timestamp_column``
in their tables (a source whose tables lack the column, or hold no row, reports ``None``): one catalog read
of the matching schemas' columns, then ONE batched ``UNION ALL`` of ``MAX(column)`` over every table that
has it, so a sensor sees new rows land without a query per table. A plugin with a discovery of its own
(``fivetran``) returns it from ``AdapterPlugin.discovery``.

Schemas that carry the pattern's prefix but do not fit it come back in ``misfits``; callers warn about
each one (a source is never dropped silently). A source the adapter tried and failed to read goes to
``failed_sources``: consumers must not treat it as deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from rocky_engine.config.schema_pattern import ComponentValue, Misfit, ParsedSchema, SchemaPattern
from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.config import RockyConfig
    from rocky_engine.config.pipelines import ReplicationPipeline

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
    """Answers "which sources exist" for one replication pipeline.

    ``last_sync=False``: the caller does not need ``last_sync_at`` (a run plans from the tables alone), so an
    adapter that pays for it with extra reads may leave it ``None``.
    """

    def discover(self, pipeline: ReplicationPipeline, *, last_sync: bool = True) -> DiscoverOutcome: ...

    def close(self) -> None: ...


class WarehouseDiscovery:
    """Lists the schemas of the source warehouse that fit the pipeline's schema pattern."""

    def __init__(self, adapter: WarehouseAdapter, *, owns_adapter: bool = False) -> None:
        self.adapter = adapter
        self._owns = owns_adapter

    def discover(self, pipeline: ReplicationPipeline, *, last_sync: bool = True) -> DiscoverOutcome:
        pattern = SchemaPattern.from_config(pipeline.source.schema_pattern)
        catalog = pipeline.source.catalog or self.adapter.catalog
        if catalog != self.adapter.catalog and self.adapter.dialect.capabilities.single_catalog:
            raise ConfigError(
                f"source catalog '{catalog}' is not the database of adapter '{self.adapter.name}' "
                f"('{self.adapter.catalog}')",
                key="source.catalog",
                hint=f"a {self.adapter.type} adapter reads one database: point [source] at that database's "
                "adapter",
            )
        by_schema: dict[str, list[DiscoveredTable]] = {}
        for table in self.adapter.catalog_tables(catalog):
            by_schema.setdefault(table.schema, []).append(DiscoveredTable(table.name, table.row_count))
        outcome = build_outcome(pattern, by_schema, self.adapter.type)
        if not last_sync:
            # a run: a catalog read of the columns and MAX(timestamp_column) over every source table (a
            # scan of each one without an index) would be per-run fixed cost for a field it never reads
            return outcome
        synced = self._last_sync(catalog, outcome.sources, pipeline.timestamp_column)
        outcome.sources = [replace(s, last_sync_at=synced.get(s.schema)) for s in outcome.sources]
        return outcome

    def _last_sync(
        self, catalog: str, sources: list[DiscoveredSource], column: str
    ) -> dict[str, datetime]:
        """Per source schema, the newest ``column`` value over its tables: one catalog read of the columns,
        then one batched query. A failure is a warning (discovery itself succeeded), never an error."""
        if not sources or not column:
            return {}
        from rocky_engine.errors import AdapterError
        from rocky_engine.logs import get_logger

        wanted = column.lower()
        literal, quote = self.adapter.dialect.literal, self.adapter.quote
        try:
            columns = self.adapter.read_columns(catalog, [s.schema for s in sources])
            parts: list[str] = []
            for source in sources:
                for table in source.tables:
                    found = next((c for c in columns.get((source.schema, table.name), ())
                                  if c.name.lower() == wanted and _temporal(c.data_type)), None)
                    if found is not None:
                        parts.append(
                            f"SELECT {literal(source.schema)}, MAX({quote(found.name)}) FROM "
                            f"{self.adapter.qualified(source.schema, table.name, catalog)}"
                        )
            if not parts:
                return {}
            rows = self.adapter.query(" UNION ALL ".join(parts))
        except AdapterError as exc:
            get_logger("discover").warning("last_sync_at not read (MAX(%s) of the source tables): %s",
                                           column, exc.message)
            return {}
        newest: dict[str, datetime] = {}
        for schema, value in rows:
            moment = _as_utc(value)
            if moment is not None and (schema not in newest or moment > newest[schema]):
                newest[str(schema)] = moment
        return newest

    def close(self) -> None:
        if self._owns:
            self.adapter.close()


def _temporal(data_type: str) -> bool:
    """A date or timestamp column (``last_sync_at`` is a moment, not a number or a string)."""
    low = data_type.lower()
    return "timestamp" in low or low.startswith("date")


def _as_utc(value: Any) -> datetime | None:
    """A MAX() result as an aware UTC moment (a naive TIMESTAMP is read as UTC, a DATE as its midnight)."""
    from datetime import UTC, date, time

    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    return None


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
    from rocky_engine.adapters.registry import open_adapter, plugin_of

    name = pipeline.source.discovery.adapter if pipeline.source.discovery else pipeline.source.adapter
    own = plugin_of(config, name).discovery(config, name)
    if own is not None:
        return own
    if source_adapter is not None and name == source_adapter.name:
        return WarehouseDiscovery(source_adapter)
    return WarehouseDiscovery(open_adapter(config, name, read_only=read_only), owns_adapter=True)
