"""The Fivetran REST API as discovery reads it: two GET calls, retries, and errors by class.

Transient failures (5xx, timeouts, a lost connection) are retried with ``[adapter.NAME.retry]`` and
counted by the adapter's circuit breaker. A 429 carries its ``Retry-After`` as ``cooldown_seconds``.
Messages never include the API key or secret.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from rocky_engine import __version__
from rocky_engine.adapters.breaker import CircuitBreaker
from rocky_engine.adapters.retry import StatementRetrier
from rocky_engine.errors import AdapterError
from rocky_engine.logs import get_logger

if TYPE_CHECKING:
    from rocky_engine.config.adapters import FivetranAdapterConfig

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
        super().__init__(message, failure_kind=failure_kind, hint=hint, cooldown_seconds=cooldown_seconds)


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
