"""Fivetran discovery: the connectors of one destination group, their tables and last successful sync.

``[adapter.NAME] type = "fivetran"`` (``api_key``, ``api_secret``, ``destination_id``, ``base_url``) answers
``[source.discovery] adapter = "NAME"``. One source per connector whose destination schema fits the
pipeline's schema pattern: ``id`` is the connector id, ``schema`` its destination schema, ``last_sync_at``
its ``succeeded_at``, and its tables are the enabled tables of its enabled schemas (names as they appear in
the destination).

Failures are per connector: a 5xx, a timeout, a 429 or a refused credential while reading one connector's
schema config puts that connector in ``failed_sources`` (``error_class`` transient | timeout | rate_limit |
auth | unknown, ``cooldown_seconds`` from ``Retry-After``) and the others are still reported; a connector is
never dropped silently. Transient errors are retried with ``[adapter.NAME.retry]`` first. Only failing to
list the group's connectors at all fails the whole discovery (an empty list would look like every source
was deleted).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from rocky_engine.adapters.discovery import (
    DiscoveredSource,
    DiscoveredTable,
    DiscoverOutcome,
    FailedSource,
)
from rocky_engine.adapters.fivetran.client import FivetranApiError, FivetranClient
from rocky_engine.config.schema_pattern import SchemaPattern
from rocky_engine.errors import AdapterError, ConfigError
from rocky_engine.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from rocky_engine.config import RockyConfig
    from rocky_engine.config.pipelines import ReplicationPipeline

SOURCE_TYPE = "fivetran"
#: connectors whose schema config is fetched at once (the API is latency-bound, not CPU-bound)
FETCH_WORKERS = 8


def enabled_tables(schema_config: dict[str, Any]) -> list[DiscoveredTable]:
    """The enabled tables of the enabled schemas, by destination name, sorted and de-duplicated."""
    names: set[str] = set()
    schemas = schema_config.get("schemas") or {}
    if not isinstance(schemas, dict):
        return []
    for schema in schemas.values():
        if not isinstance(schema, dict) or schema.get("enabled", True) is False:
            continue
        for table_name, table in (schema.get("tables") or {}).items():
            if not isinstance(table, dict) or table.get("enabled", True) is False:
                continue
            names.add(str(table.get("name_in_destination") or table_name))
    return [DiscoveredTable(name) for name in sorted(names)]


def parse_sync_time(value: Any) -> datetime | None:
    """``succeeded_at`` as an aware UTC datetime; None when the connector never succeeded."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


class FivetranDiscovery:
    """The ``DiscoveryAdapter`` of a ``fivetran`` adapter (built as ``FivetranDiscovery(config, name)``)."""

    def __init__(
        self,
        config: RockyConfig,
        adapter_name: str,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        adapter_cfg = config.adapter(adapter_name)
        if adapter_cfg.type != "fivetran":
            raise ConfigError(
                f"adapter '{adapter_name}' has type '{adapter_cfg.type}', not 'fivetran'",
                file=config.path,
                key=f"adapter.{adapter_name}.type",
            )
        self.cfg = adapter_cfg
        self.name = adapter_name
        self.client = FivetranClient(adapter_cfg, adapter_name, transport=transport, sleep=sleep)
        self._log = get_logger("fivetran")

    def close(self) -> None:
        self.client.close()

    def discover(self, pipeline: ReplicationPipeline, *, last_sync: bool = True) -> DiscoverOutcome:
        """Sources of the destination group that fit ``pipeline``'s schema pattern (``last_sync_at`` comes
        with the connector listing, so ``last_sync`` changes nothing here).

        Raises:
            FivetranApiError: the group's connectors could not be listed at all.
        """
        started = time.perf_counter()
        pattern = SchemaPattern.from_config(pipeline.source.schema_pattern)
        outcome = DiscoverOutcome()
        candidates: list[tuple[dict[str, Any], str, dict[str, Any]]] = []
        for connector in self.client.connectors(self.cfg.destination_id):
            schema = str(connector.get("schema") or "")
            parsed = outcome.fit(pattern, schema)
            if parsed is not None:
                candidates.append((connector, schema, dict(parsed.components)))

        def fetch(item: tuple[dict[str, Any], str, dict[str, Any]]) -> DiscoveredSource | FailedSource:
            connector, schema, components = item
            connector_id = str(connector["id"])
            try:
                config = self.client.schema_config(connector_id)
            except FivetranApiError as exc:
                return FailedSource(
                    id=connector_id,
                    schema=schema,
                    source_type=SOURCE_TYPE,
                    error_class=exc.error_class,
                    message=exc.message,
                    cooldown_seconds=exc.cooldown_seconds,
                )
            except AdapterError as exc:  # the breaker opened: the API is down, the connector is not gone
                return FailedSource(
                    id=connector_id,
                    schema=schema,
                    source_type=SOURCE_TYPE,
                    error_class="transient",
                    message=exc.message,
                )
            return DiscoveredSource(
                id=connector_id,
                schema=schema,
                components=components,
                source_type=SOURCE_TYPE,
                last_sync_at=parse_sync_time(connector.get("succeeded_at")),
                tables=tuple(enabled_tables(config)),
                metadata=_metadata(connector),
            )

        with ThreadPoolExecutor(max_workers=FETCH_WORKERS, thread_name_prefix="fivetran") as pool:
            results = list(pool.map(fetch, candidates))
        for result in results:
            if isinstance(result, FailedSource):
                self._log.warning(
                    "fivetran connector %s (%s) could not be read (%s): %s; reported in failed_sources",
                    result.id,
                    result.schema,
                    result.error_class,
                    result.message,
                )
                outcome.failed_sources.append(result)
            else:
                outcome.sources.append(result)
        outcome.sources.sort(key=lambda s: s.schema)
        outcome.failed_sources.sort(key=lambda s: s.schema)
        self._log.info(
            "fivetran discovery: %d source(s), %d failed, in %.2f s",
            len(outcome.sources),
            len(outcome.failed_sources),
            time.perf_counter() - started,
        )
        return outcome


def _metadata(connector: dict[str, Any]) -> dict[str, Any]:
    status = connector.get("status") if isinstance(connector.get("status"), dict) else {}
    meta: dict[str, Any] = {
        "service": connector.get("service"),
        "paused": connector.get("paused"),
        "sync_state": status.get("sync_state") if status else None,
        "setup_state": status.get("setup_state") if status else None,
        "failed_at": connector.get("failed_at"),
    }
    return {k: v for k, v in meta.items() if v is not None}
