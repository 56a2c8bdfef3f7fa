"""Webhook signature checks: Rocky's ``X-Rocky-Signature`` and the Standard Webhooks scheme.

- ``X-Rocky-Signature: <hex>``: HMAC-SHA256 of the raw body keyed with the secret's UTF-8 bytes, hex
  encoded (``sha256=<hex>``, the form Rocky's own outbound hooks send, is accepted too). It carries no
  timestamp, so a captured request can be replayed; the delivery id dedupe is what stops a double fire.
- Standard Webhooks (``webhook-id``, ``webhook-timestamp``, ``webhook-signature: v1,<base64> ...``): HMAC-
  SHA256 of ``"{id}.{timestamp}.{body}"``; a ``whsec_``-prefixed secret is base64 after the prefix. The
  timestamp must be within 5 minutes of the server clock, so a replay outside that window is refused.

``ROCKY_WEBHOOK_SECRET`` may hold several comma-separated secrets while one is rotated out; any one
verifies. Every comparison is constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

TOLERANCE_SECONDS = 300
ROCKY_HEADER = "x-rocky-signature"
SW_ID = "webhook-id"
SW_TIMESTAMP = "webhook-timestamp"
SW_SIGNATURE = "webhook-signature"

Scheme = Literal["rocky", "standard"]


@dataclass(frozen=True)
class Verdict:
    """The outcome of a signature check; ``reason`` is the 401 message when it failed."""

    ok: bool
    scheme: Scheme | None = None
    reason: str | None = None
    #: the Standard Webhooks ``webhook-id`` (a delivery id for dedupe)
    webhook_id: str | None = None


def rocky_signature(secret: str, body: bytes) -> str:
    """The hex ``X-Rocky-Signature`` of ``body`` (what a sender computes)."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _sw_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret[len("whsec_"):], validate=True)
        except (binascii.Error, ValueError):
            pass
    return secret.encode()


def standard_signature(secret: str, webhook_id: str, timestamp: str, body: bytes) -> str:
    """The ``v1,<base64>`` Standard Webhooks signature (what a sender computes)."""
    mac = hmac.new(_sw_key(secret), f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify(headers: Mapping[str, str], body: bytes, secrets: Sequence[str], now: float) -> Verdict:
    """Check the request's signature against every secret.

    Args:
        headers: request headers with lower-case names (Starlette's ``Headers`` is case-insensitive).
        body: the raw body, exactly as received.
        secrets: the configured secrets (at least one).
        now: the server clock, seconds since the epoch.
    """
    if headers.get(SW_SIGNATURE) is not None or headers.get(SW_ID) is not None:
        return _verify_standard(headers, body, secrets, now)
    given = headers.get(ROCKY_HEADER)
    if given is None:
        return Verdict(
            False, reason="missing signature: send X-Rocky-Signature (hex HMAC-SHA256 of the raw body) or "
            "the Standard Webhooks headers webhook-id, webhook-timestamp and webhook-signature",
        )
    text = given.strip().lower()
    if text.startswith("sha256="):
        text = text[len("sha256="):]
    candidate = text.encode("ascii", "replace")
    matched = False
    for secret in secrets:
        # No early exit: every secret is compared, so timing does not tell which one matched.
        matched |= hmac.compare_digest(rocky_signature(secret, body).encode(), candidate)
    if not matched:
        return Verdict(False, "rocky", reason="X-Rocky-Signature does not match the body")
    return Verdict(True, "rocky")


def _verify_standard(headers: Mapping[str, str], body: bytes, secrets: Sequence[str], now: float) -> Verdict:
    webhook_id = headers.get(SW_ID)
    timestamp = headers.get(SW_TIMESTAMP)
    signature = headers.get(SW_SIGNATURE)
    if not webhook_id or not timestamp or not signature:
        return Verdict(
            False, "standard",
            reason="Standard Webhooks needs all three headers: webhook-id, webhook-timestamp and "
            "webhook-signature",
        )
    try:
        sent = int(timestamp.strip())
    except ValueError:
        return Verdict(False, "standard", reason="webhook-timestamp is not an integer number of seconds")
    if abs(now - sent) > TOLERANCE_SECONDS:
        return Verdict(
            False, "standard",
            reason=f"webhook-timestamp is {int(now - sent)} s away from the server clock (tolerance "
            f"{TOLERANCE_SECONDS} s): a replayed or badly clocked request",
        )
    offered = [part.encode() for part in signature.split() if part.startswith("v1,")]
    matched = False
    for secret in secrets:
        expected = standard_signature(secret, webhook_id, timestamp.strip(), body).encode()
        for candidate in offered:
            matched |= hmac.compare_digest(expected, candidate)
    if not matched:
        return Verdict(False, "standard", reason="webhook-signature does not match the request")
    return Verdict(True, "standard", webhook_id=webhook_id)
