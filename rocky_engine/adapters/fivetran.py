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

import email.utils
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from rocky_engine import __version__
from rocky_engine.adapters.discovery import (
    DiscoveredSource,
    DiscoveredTable,
    DiscoverOutcome,
    FailedSource,
)
from rocky_engine.errors import AdapterError, ConfigError
from rocky_engine.logs import get_logger
from rocky_engine.replication.schema_pattern import SchemaPattern
from rocky_engine.run.retry import CircuitBreaker, StatementRetrier

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig
    from rocky_engine.config.adapters import FivetranAdapterConfig
    from rocky_engine.config.pipelines import ReplicationPipeline

SOURCE_TYPE = "fivetran"
#: connectors whose schema config is fetched at once (the API is latency-bound, not CPU-bound)
FETCH_WORKERS = 8
#: connectors per page when listing a group
PAGE_LIMIT = 1000
REQUEST_TIMEOUT_SECONDS = 30.0


class FivetranApiError(AdapterError):
    """A Fivetran API call failed: ``error_class`` is the discover wire value, ``failure_kind`` drives
    retries."""

    def __init__(
        self,
        message: str,
        *,
        error_class: str,
        failure_kind: str,
        status: int | None = None,
        cooldown_seconds: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.error_class = error_class
        self.status = status
        self.cooldown_seconds = cooldown_seconds
        super().__init__(message, failure_kind=failure_kind, hint=hint)


def retry_after_seconds(
    value: str | None, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> int | None:
    """``Retry-After`` as whole seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0, int((when - now()).total_seconds() + 0.999))


def classify_response(response: httpx.Response, what: str) -> FivetranApiError:
    """The error for a non-2xx answer (never includes credentials)."""
    status = response.status_code
    detail = _api_message(response)
    message = f"Fivetran API {what} answered HTTP {status}" + (f": {detail}" if detail else "")
    if status == 429:
        cooldown = retry_after_seconds(response.headers.get("Retry-After"))
        return FivetranApiError(
            message,
            error_class="rate_limit",
            failure_kind="quota-exceeded",
            status=status,
            cooldown_seconds=cooldown,
            hint="Fivetran rate-limited this key; retry later",
        )
    if status in (401, 403):
        return FivetranApiError(
            message,
            error_class="auth",
            failure_kind="auth-failed",
            status=status,
            hint="check api_key / api_secret and the key's access to the destination",
        )
    if status >= 500:
        return FivetranApiError(message, error_class="transient", failure_kind="transient", status=status)
    if status == 404:
        return FivetranApiError(message, error_class="unknown", failure_kind="not-found", status=status)
    return FivetranApiError(message, error_class="unknown", failure_kind="query-rejected", status=status)


def _api_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip()
    if isinstance(body, dict):
        return str(body.get("message") or body.get("code") or "")[:200]
    return ""


class FivetranClient:
    """The two read calls discovery needs, with the engine's retry policy around transient failures."""

    def __init__(
        self,
        cfg: FivetranAdapterConfig,
        name: str,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], object] | None = None,
        timeout_seconds: float | None = None,
    ) -> None:
        self.name = name
        self._http = httpx.Client(
            base_url=cfg.base_url.rstrip("/"),
            auth=httpx.BasicAuth(cfg.api_key.get_secret_value(), cfg.api_secret.get_secret_value()),
            headers={"Accept": "application/json;version=2", "User-Agent": f"rocky/{__version__}"},
            timeout=timeout_seconds if timeout_seconds is not None else REQUEST_TIMEOUT_SECONDS,
            transport=transport,
        )
        self._retrier = StatementRetrier(
            cfg.retry, CircuitBreaker.for_adapter(name, cfg.retry), sleep=sleep, log=get_logger("fivetran")
        )

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, what: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET ``path`` and return its ``data`` object, retrying transient failures."""
        return self._retrier.call(lambda: self._get_once(path, what, params), f"GET {path}")

    def _get_once(self, path: str, what: str, params: dict[str, Any] | None) -> dict[str, Any]:
        try:
            response = self._http.get(path, params=params)
        except httpx.TimeoutException as exc:
            raise FivetranApiError(
                f"Fivetran API {what} timed out ({type(exc).__name__})",
                error_class="timeout",
                failure_kind="transient",
            ) from exc
        except httpx.TransportError as exc:
            raise FivetranApiError(
                f"Fivetran API {what} could not be reached: {exc}",
                error_class="transient",
                failure_kind="connection-failed",
            ) from exc
        if response.status_code >= 400:
            raise classify_response(response, what)
        try:
            body = response.json()
        except ValueError as exc:
            raise FivetranApiError(
                f"Fivetran API {what} answered with a body that is not JSON",
                error_class="unknown",
                failure_kind="unknown",
                status=response.status_code,
            ) from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise FivetranApiError(
                f"Fivetran API {what} answered without a 'data' object",
                error_class="unknown",
                failure_kind="unknown",
                status=response.status_code,
            )
        return data

    def connectors(self, group_id: str) -> Iterator[dict[str, Any]]:
        """Every connector of the group, following ``next_cursor`` pages."""
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": PAGE_LIMIT}
            if cursor:
                params["cursor"] = cursor
            data = self.get(
                f"/v1/groups/{group_id}/connectors", f"list of connectors of group {group_id}", params
            )
            for item in data.get("items") or []:
                if isinstance(item, dict) and item.get("id"):
                    yield item
            cursor = data.get("next_cursor") or None
            if not cursor:
                return

    def schema_config(self, connector_id: str) -> dict[str, Any]:
        return self.get(
            f"/v1/connectors/{connector_id}/schemas", f"schema config of connector {connector_id}"
        )


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

    def discover(self, pipeline: ReplicationPipeline) -> DiscoverOutcome:
        """Sources of the destination group that fit ``pipeline``'s schema pattern.

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
