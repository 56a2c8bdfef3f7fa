"""Outbound webhooks: render, sign, send, retry; a failing receiver never fails the run.

Every request carries ``X-Rocky-Event`` and ``X-Rocky-Delivery`` (one id for all attempts of a delivery,
so a receiver can dedupe retries) and, with ``secret``, ``X-Rocky-Signature: sha256=<hex>`` (HMAC-SHA256
of the exact body bytes). A delivery is tried ``1 + retry_count`` times, ``retry_delay_ms`` apart, while
the receiver times out, cannot be reached, or answers 5xx / 408 / 429; any other 4xx is final.

The URL (Slack and Teams URLs embed their token), the secret and the response body never appear in a
message: a receiver is named by scheme and host only.

``httpx`` is imported here only, and this module is imported only when a webhook fires.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from rocky_engine import __version__
from rocky_engine.config.hooks import WebhookHook
from rocky_engine.hooks.event import HookEvent
from rocky_engine.hooks.presets import ROUTING_KEY_HEADERS, PresetError, render_body
from rocky_engine.redact import MIN_BYTES, known

SIGNATURE_HEADER = "X-Rocky-Signature"
_RETRYABLE_STATUS = frozenset({408, 429})


@dataclass(frozen=True)
class DeliveryOutcome:
    """What one webhook delivery did (all attempts)."""

    ok: bool
    attempts: int
    status_code: int | None
    duration_ms: int
    #: why the last attempt failed, without URL or secret
    error: str | None = None


def sign(secret: str, body: bytes) -> str:
    """The ``X-Rocky-Signature`` value for ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def receiver_name(url: str) -> str:
    """``scheme://host[:port]`` of a URL: enough to recognise a receiver, without its path or token."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(unparseable URL)"
    return f"{parts.scheme or '?'}://{host}{port}"


def build_request(hook: WebhookHook, event: HookEvent) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a delivery of ``event``.

    Raises:
        PresetError: the preset cannot be rendered as configured.
    """
    user_headers = dict(hook.headers)
    body, content_type = render_body(hook.preset, event, hook.body_template, user_headers)
    if hook.preset == "pagerduty":
        # The routing key travels in the body; sending it as a header too would leak it to proxies' logs.
        user_headers = {k: v for k, v in user_headers.items() if k.lower() not in ROUTING_KEY_HEADERS}
    headers = {
        "Content-Type": content_type,
        "User-Agent": f"rocky/{__version__}",
        "X-Rocky-Event": event.event,
        "X-Rocky-Delivery": uuid.uuid4().hex,
    }
    lowered = {k.lower(): k for k in headers}
    for name, value in user_headers.items():
        headers.pop(lowered.get(name.lower(), name), None)
        headers[name] = value
    if hook.secret is not None:
        headers = {k: v for k, v in headers.items() if k.lower() != SIGNATURE_HEADER.lower()}
        headers[SIGNATURE_HEADER] = sign(hook.secret.get_secret_value(), body)
    return body, headers


def deliver_webhook(
    hook: WebhookHook,
    event: HookEvent,
    *,
    sleep: Callable[[float], None] = time.sleep,
    transport: Any = None,
) -> DeliveryOutcome:
    """Deliver ``event`` to ``hook`` with its retry policy; never raises."""
    t0 = time.perf_counter()
    try:
        body, headers = build_request(hook, event)
    except PresetError as exc:
        return DeliveryOutcome(ok=False, attempts=0, status_code=None, duration_ms=_ms(t0), error=str(exc))

    import httpx

    status: int | None = None
    error: str | None = None
    attempts = 0
    timeout = hook.timeout_ms / 1000
    try:
        client = httpx.Client(timeout=timeout, follow_redirects=False, transport=transport)
    except (ValueError, httpx.HTTPError) as exc:  # e.g. an unusable proxy variable
        return DeliveryOutcome(
            ok=False, attempts=0, status_code=None, duration_ms=_ms(t0), error=_scrub(str(exc), hook)
        )
    with client:
        for attempt in range(1, hook.retry_count + 2):
            attempts = attempt
            retryable = True
            try:
                response = client.request(hook.method, hook.url, content=body, headers=headers)
            except httpx.TimeoutException:
                status, error = None, f"timed out after {hook.timeout_ms} ms"
            except httpx.HTTPError as exc:
                status, error = None, _scrub(f"{type(exc).__name__}: {exc}", hook)
            except ValueError as exc:  # a URL httpx cannot use at all: retrying will not help
                status, error, retryable = None, _scrub(str(exc), hook), False
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return DeliveryOutcome(ok=True, attempts=attempt, status_code=status, duration_ms=_ms(t0))
                error = f"HTTP {status}"
                retryable = status >= 500 or status in _RETRYABLE_STATUS
            if not retryable:
                break
            if attempt <= hook.retry_count and hook.retry_delay_ms > 0:
                sleep(hook.retry_delay_ms / 1000)
    return DeliveryOutcome(ok=False, attempts=attempts, status_code=status, duration_ms=_ms(t0), error=error)


def _scrub(text: str, hook: WebhookHook) -> str:
    """Remove the URL (and anything after its host), the secret, the header values and every other secret
    of the project (rocky_engine/redact.py) from an exception message."""
    text = text.replace(hook.url, receiver_name(hook.url))
    path = hook.url.split("://", 1)[-1].partition("/")[2]
    if len(path) >= MIN_BYTES:  # a message may quote the path alone, where Slack keeps its token
        text = text.replace(path, "***")
    if hook.secret is not None and hook.secret.get_secret_value():
        text = text.replace(hook.secret.get_secret_value(), "***")
    for value in hook.headers.values():
        if len(value) >= MIN_BYTES:
            text = text.replace(value, "***")
    return known()(text)


def _ms(t0: float) -> int:
    return int((time.perf_counter() - t0) * 1000)
