"""The webhook spool ``.rocky/pending-demands/``: accepted demands waiting for the next tick.

File format: one JSON file per demand, named after its dedupe key (``<key>.json``), the document
``rocky_engine.wire.spool.SpoolDemandFile`` (``delivery_id`` only when the sender gave
``X-Rocky-Delivery``; the body itself is never stored, it may carry secrets: its hash is).

Producer (the server's webhook route): :func:`write_demand` writes a temp file, fsyncs it, hard-links it
to ``<key>.json`` (the link fails when the same key is already queued: a duplicate), removes the temp
name and fsyncs the directory, all before the 202. The key is ``d-`` + sha256(pipeline, delivery id) when a
delivery id is given, else ``b-`` + sha256(pipeline, body hash). A consumed delivery id leaves a marker in
``.consumed/`` that dedupes redeliveries for 24 hours; a body hash dedupes only while queued.

Consumer (the reconciler): :func:`list_demands` reads the queue (a missing directory is an empty queue; an
unreadable one is an error, never "empty"), and :func:`consume` removes a demand once its claim is
committed, so each demand is attempted at most once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from rocky_engine.errors import StateError
from rocky_engine.state._time import from_db, rfc3339, utc
from rocky_engine.wire.base import validation_summary
from rocky_engine.wire.spool import SpoolDemandFile, SpoolEntry

SPOOL_DIR = "pending-demands"
CONSUMED_DIR = ".consumed"
DELIVERY_DEDUPE_TTL = timedelta(hours=24)


class SpoolError(StateError):
    """The spool cannot be read or written; "we cannot tell" is not "nothing is waiting"."""


@dataclass(frozen=True)
class Demand:
    """One accepted webhook demand."""

    demand_uid: str
    pipeline: str
    body_sha256: str
    accepted_at: datetime
    dedupe_key: str
    path: Path
    delivery_id: str | None = None
    body_bytes: int | None = None

    def entry(self) -> SpoolEntry:
        """This demand as a listing shows it."""
        return SpoolEntry(
            demand_uid=self.demand_uid, pipeline=self.pipeline, accepted_at=rfc3339(self.accepted_at),
            body_sha256=self.body_sha256, delivery_id=self.delivery_id,
        )


@dataclass
class SpoolListing:
    """The readable demands (oldest first) and what could not be read."""

    demands: list[Demand] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SpoolWrite:
    status: Literal["accepted", "duplicate"]
    demand_uid: str | None
    path: Path


def spool_dir_of(dot_rocky: Path) -> Path:
    return dot_rocky / SPOOL_DIR


def dedupe_key(pipeline: str, *, delivery_id: str | None, body_sha256: str) -> str:
    if delivery_id:
        digest = hashlib.sha256(f"{pipeline}\0delivery\0{delivery_id}".encode()).hexdigest()
        return f"d-{digest[:40]}"
    digest = hashlib.sha256(f"{pipeline}\0body\0{body_sha256}".encode()).hexdigest()
    return f"b-{digest[:40]}"


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _consumed_recently(spool: Path, key: str, now: datetime) -> bool:
    marker = spool / CONSUMED_DIR / key
    try:
        consumed_at = marker.stat().st_mtime
    except FileNotFoundError:
        return False
    return utc(now).timestamp() - consumed_at < DELIVERY_DEDUPE_TTL.total_seconds()


# ---------------------------------------------------------------------- producer


def write_demand(
    spool: Path, *, pipeline: str, body: bytes, delivery_id: str | None, now: datetime
) -> SpoolWrite:
    """Durably queue a demand (fsync'd before return) or report it as a duplicate.

    Raises:
        SpoolError: the spool directory cannot be created or written.
    """
    body_sha = hashlib.sha256(body).hexdigest()
    key = dedupe_key(pipeline, delivery_id=delivery_id, body_sha256=body_sha)
    final = spool / f"{key}.json"
    try:
        spool.mkdir(parents=True, exist_ok=True)
        if delivery_id and _consumed_recently(spool, key, now):
            return SpoolWrite("duplicate", None, final)
        uid = uuid.uuid4().hex
        doc = SpoolDemandFile(
            demand_uid=uid, pipeline=pipeline, body_sha256=body_sha, body_bytes=len(body),
            accepted_at=rfc3339(now), dedupe_key=key, delivery_id=delivery_id or None,
        )
        tmp = spool / f".tmp-{uid}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, (json.dumps(doc.wire(), separators=(",", ":")) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, final)
        except FileExistsError:
            return SpoolWrite("duplicate", None, final)
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(spool)
        if delivery_id and _consumed_recently(spool, key, now):
            # A consumer finished the same delivery between our check and our link: undo, it is a duplicate.
            final.unlink(missing_ok=True)
            _fsync_dir(spool)
            return SpoolWrite("duplicate", None, final)
    except OSError as exc:
        raise SpoolError(
            f"cannot write to the webhook spool {spool}: {exc}",
            hint="check that .rocky/pending-demands is a writable directory on the project's volume",
        ) from exc
    return SpoolWrite("accepted", uid, final)


# ---------------------------------------------------------------------- consumer


def list_demands(spool: Path) -> SpoolListing:
    """Every queued demand, oldest first; unreadable entries go to ``errors`` (a missing dir is empty)."""
    listing = SpoolListing()
    if not spool.exists():
        if spool.is_symlink():
            listing.errors.append(
                f"webhook spool {spool} is a dangling symlink; cannot tell whether demands are waiting"
            )
        return listing
    try:
        names = sorted(os.listdir(spool))
    except OSError as exc:
        listing.errors.append(f"cannot read the webhook spool {spool}: {exc.strerror or exc}")
        return listing
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        path = spool / name
        try:
            listing.demands.append(_read_demand(path))
        except (OSError, ValueError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else validation_summary(exc)
            listing.errors.append(f"cannot read webhook demand {path}: {detail}")
    listing.demands.sort(key=lambda d: (d.accepted_at, d.demand_uid))
    return listing


def _read_demand(path: Path) -> Demand:
    """Raises ValueError: not JSON, or not a demand document (pydantic's error is a ValueError)."""
    doc = SpoolDemandFile.model_validate_json(path.read_bytes())
    return Demand(
        demand_uid=doc.demand_uid,
        pipeline=doc.pipeline,
        body_sha256=doc.body_sha256,
        accepted_at=from_db(doc.accepted_at.replace("Z", "+00:00")),
        dedupe_key=doc.dedupe_key or path.stem,
        path=path,
        delivery_id=doc.delivery_id,
        body_bytes=doc.body_bytes,
    )


def consume(spool: Path, demand: Demand, now: datetime) -> None:
    """Remove a demand whose claim is committed; a delivery id leaves its 24 h dedupe marker first.

    Raises:
        SpoolError: the file cannot be removed (the claim still prevents a second run).
    """
    try:
        if demand.delivery_id:
            consumed = spool / CONSUMED_DIR
            consumed.mkdir(exist_ok=True)
            marker = consumed / demand.dedupe_key
            marker.write_text(rfc3339(now) + "\n", encoding="utf-8")
            stamp = utc(now).timestamp()
            os.utime(marker, (stamp, stamp))
        demand.path.unlink(missing_ok=True)
        _fsync_dir(spool)
    except OSError as exc:
        raise SpoolError(f"cannot remove consumed webhook demand {demand.path}: {exc}") from exc


def sweep_markers(spool: Path, now: datetime) -> int:
    """Delete delivery markers older than 24 h; returns how many went."""
    consumed = spool / CONSUMED_DIR
    removed = 0
    if not consumed.is_dir() or consumed.is_symlink():
        return 0
    cutoff = utc(now).timestamp() - DELIVERY_DEDUPE_TTL.total_seconds()
    for marker in consumed.iterdir():
        with contextlib.suppress(OSError):
            if marker.is_file() and marker.stat().st_mtime < cutoff:
                marker.unlink()
                removed += 1
    return removed
