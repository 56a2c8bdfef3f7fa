"""The ``rocky discover`` document (CONTRACT section 4).

``last_sync_at`` is a datetime here (``dagster_rocky``'s sensor compares parsed moments) and is written as
RFC 3339 UTC with ``Z``, or ``null`` when the source has no sync clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

ErrorClass = Literal["transient", "timeout", "rate_limit", "auth", "unknown"]


class TableInfo(WireModel):
    """One table of a discovered source."""

    name: str
    row_count: int | None = None


class SourceInfo(WireModel):
    """One discovered source (a connector schema), its components and its tables."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"components", "source_type", "last_sync_at", "tables"})

    id: str
    #: schema-pattern components in pattern order; a variadic component holds a list
    components: dict[str, str | list[str]] = Field(default_factory=dict)
    source_type: str = ""
    #: when the upstream connector last finished a sync (timezone-aware), None when unknown
    last_sync_at: datetime | None = None
    tables: list[TableInfo] = Field(default_factory=list)
    #: what the engine adds about the source (``pipeline``: the pipeline that replicates it)
    metadata: dict[str, Any] = Field(default_factory=dict)


class FailedSourceOutput(WireModel):
    """A source the discovery adapter tried and failed to read: never to be treated as deleted."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"schema_", "source_type", "error_class", "message"})

    id: str
    schema_: str = Field(default="", alias="schema")
    source_type: str = ""
    #: one of :data:`ErrorClass` (read as text, so a newer engine's class does not break a reader)
    error_class: str = "unknown"
    message: str = ""
    cooldown_seconds: int | None = None


class FreshnessCheckConfig(WireModel):
    threshold_seconds: int


class ExcludedTable(WireModel):
    """A table ``excluded_tables`` left out (the published client's shape)."""

    asset_key: list[str]
    source_schema: str
    table_name: str
    #: which ``excluded_tables`` pattern matched
    reason: str


class DiscoverChecks(WireModel):
    """Checks the project declares for discovered tables (only freshness is reported by discover)."""

    freshness: FreshnessCheckConfig | None = None


class DiscoverResult(WireModel):
    """``rocky discover --output json``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "sources"})

    version: str = __version__
    command: Literal["discover"] = "discover"
    sources: list[SourceInfo] = Field(default_factory=list)
    checks: DiscoverChecks | None = None
    failed_sources: list[FailedSourceOutput] = Field(default_factory=list)
    excluded_tables: list[ExcludedTable] = Field(default_factory=list)
