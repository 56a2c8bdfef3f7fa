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

from typing import ClassVar, Literal, Self

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published

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


class SpoolPending(WireModel):
    """One queued demand as the published client reads it (``pending[]``)."""

    demand_uid: str
    pipeline: str
    received_at: str
    body_hash: str
    #: ``id``: deduplicated by the sender's ``X-Rocky-Delivery`` (``token``); ``body``: by the body's hash
    kind: Literal["id", "body"]
    token: str


class SpoolSkipped(WireModel):
    file: str
    reason: str
    detail: str


class SpoolCounts(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"pending", "skipped", "corrupt"})

    pending: int = 0
    #: always 0 here: an unreadable demand fails the listing instead of being skipped
    skipped: int = 0
    corrupt: int = 0


class SpoolResult(WireModel):
    """``{version, command: "state-schedule-spool", action: "spool", spool, spool_path, demands[], pending[],
    skipped[], counts}``: accepted, unconsumed demands, in our shape (``demands``) and the published one
    (``pending``); build it with :meth:`of`."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "action", "demands", "pending", "skipped", "counts"}
    )

    version: str = __version__
    #: the published client dispatches on this name
    command: Literal["state-schedule-spool"] = "state-schedule-spool"
    action: Literal["spool"] = "spool"
    #: the spool directory
    spool: str = published("spool_path")
    demands: list[SpoolEntry] = Field(default_factory=list)
    pending: list[SpoolPending] = Field(default_factory=list)
    skipped: list[SpoolSkipped] = Field(default_factory=list)
    counts: SpoolCounts = Field(default_factory=SpoolCounts)

    @classmethod
    def of(cls, spool: str, demands: list[SpoolEntry]) -> Self:
        """The listing of ``demands`` (oldest first) in ``spool``, in both shapes."""
        pending = [
            SpoolPending(
                demand_uid=d.demand_uid, pipeline=d.pipeline, received_at=d.accepted_at,
                body_hash=d.body_sha256, kind="id" if d.delivery_id else "body",
                token=d.delivery_id or d.body_sha256,
            )
            for d in demands
        ]
        return cls(spool=spool, demands=demands, pending=pending, counts=SpoolCounts(pending=len(pending)))
