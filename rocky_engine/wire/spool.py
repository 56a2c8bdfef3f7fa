"""The webhook spool: one demand file per accepted webhook, and the listing of what is queued.

A demand file (``.rocky/pending-demands/<dedupe key>.json``, written by ``rocky serve``'s webhook route and
read by the tick that consumes it)::

    {"spool_version": 1, "demand_uid": "<32 hex>", "pipeline": "orders", "body_sha256": "<hex>",
     "body_bytes": 0, "accepted_at": "2026-05-02T03:00:00.000Z", "dedupe_key": "d-<hex>",
     "delivery_id": "evt-1"}

``delivery_id`` only when the sender gave ``X-Rocky-Delivery``. The body itself is never stored (it may
carry secrets); its hash is. The listing (``rocky state schedule spool``, ``GET /api/v1/schedule/spool``)
shows the queued demands without their internal keys.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

SPOOL_VERSION = 1


class SpoolDemandFile(WireModel):
    """One accepted, unconsumed demand as it lies in the spool."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"spool_version", "body_sha256"})

    spool_version: int = SPOOL_VERSION
    demand_uid: str
    pipeline: str
    body_sha256: str = ""
    body_bytes: int | None = None
    #: RFC 3339 UTC with milliseconds and ``Z``
    accepted_at: str
    #: the file's own name without ``.json`` (older files may lack it: the name is the key then)
    dedupe_key: str | None = None
    delivery_id: str | None = None


class SpoolEntry(WireModel):
    """One queued demand in a listing."""

    demand_uid: str
    pipeline: str
    accepted_at: str
    body_sha256: str
    delivery_id: str | None = None


class SpoolResult(WireModel):
    """``{version, command: "state", action: "spool", spool, demands[]}``: accepted, unconsumed demands."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "action", "demands"})

    version: str = __version__
    command: Literal["state"] = "state"
    action: Literal["spool"] = "spool"
    #: the spool directory
    spool: str
    demands: list[SpoolEntry] = Field(default_factory=list)
