"""Claims that hold across machines: idempotency keys and named leases on the remote backend.

A local claim is a SQLite transaction, which only serialises processes that share one state file. On a
remote backend two machines have two files, so the claim lives on the backend and is taken with an
atomic conditional write: a create is S3 ``If-None-Match: *`` / valkey ``SET NX``, and a take-over of a
failed or expired entry is a replace conditional on the generation that was read (S3 ``If-Match`` /
a valkey compare-and-set script). Of two machines racing for one key, exactly one write lands.

- :class:`RemoteIdempotency` is the :class:`~rocky_engine.state.idempotency.IdempotencyBackend` of a run on
  a remote backend (``SyncedStore.idempotency``): the CONTRACT section 3 decision table
  (``state.idempotency_decision.decide``) asked about the remote entry, the claim written conditionally,
  and the outcome mirrored into the local ``idempotency_keys`` table.
- :class:`RemoteClaims` is the generic primitive (``remote_claim`` / ``remote_get`` / ``remote_release``)
  for other exactly-once work such as connector claims.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from rocky_engine.logs import get_logger
from rocky_engine.state._time import from_db, from_db_opt, to_db, to_db_opt, utc
from rocky_engine.state.idempotency import IdempotencyRepo, check_ttl, holder_is_dead, in_flight_claim
from rocky_engine.state.idempotency_decision import (
    FAILED,
    SUCCEEDED,
    ClaimDecision,
    DedupOn,
    IdempotencyEntry,
    decide,
)
from rocky_engine.state.remote.backend import (
    ANY,
    PreconditionFailed,
    RemoteBackend,
    RemoteLayout,
    RemoteStateError,
    call_with_deadline,
)

log = get_logger("state.remote")

#: conditional writes tried before a key that keeps changing under us is reported
MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class _Entry:
    """An idempotency entry as stored remotely (timestamps in the state store's text form)."""

    state: str
    run_id: str
    claimed_at: str
    expires_at: str
    finished_at: str | None = None
    holder: str | None = None

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    def entry(self, key: str) -> IdempotencyEntry:
        return IdempotencyEntry(
            key=key, state=self.state, run_id=self.run_id, claimed_at=from_db(self.claimed_at),
            expires_at=from_db(self.expires_at), finished_at=from_db_opt(self.finished_at),
            holder=self.holder,
        )

    @classmethod
    def of(cls, entry: IdempotencyEntry) -> _Entry:
        return cls(
            state=entry.state, run_id=entry.run_id, claimed_at=to_db(entry.claimed_at),
            expires_at=to_db(entry.expires_at), finished_at=to_db_opt(entry.finished_at),
            holder=entry.holder,
        )

    @classmethod
    def decode(cls, data: bytes, where: str) -> _Entry:
        try:
            doc = json.loads(data)
            return cls(
                state=str(doc["state"]), run_id=str(doc["run_id"]), claimed_at=str(doc["claimed_at"]),
                expires_at=str(doc["expires_at"]), finished_at=doc.get("finished_at"),
                holder=doc.get("holder"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteStateError(
                f"the idempotency entry at {where} is not readable ({exc})",
                hint="delete that object to let the key run again",
            ) from None


class RemoteIdempotency:
    """Idempotency keys claimed on the remote backend, atomically across machines, mirrored into ``local``."""

    def __init__(
        self,
        local: IdempotencyRepo,
        backend: RemoteBackend,
        layout: RemoteLayout,
        *,
        retention_days: float,
        timeout_seconds: float,
    ) -> None:
        self._local = local
        self._backend = backend
        self._layout = layout
        self._retention_s = retention_days * 86400
        self._timeout = timeout_seconds

    def claim(
        self, key: str, run_id: str, *, now: datetime, ttl_hours: float, dedup_on: DedupOn = "success"
    ) -> ClaimDecision:
        """Decide on the remote entry whether ``run_id`` may run under ``key``, and claim it if so."""
        check_ttl(ttl_hours)
        decision, entry = call_with_deadline(
            lambda: self._claim(key, run_id, utc(now), ttl_hours, dedup_on),
            self._timeout, f"claiming idempotency key {key!r}",
        )
        # Kept in step locally: history, a racing run's peek, and the next upload read the local table.
        self._local.put(entry)
        return decision

    def _claim(
        self, key: str, run_id: str, moment: datetime, ttl_hours: float, dedup_on: DedupOn
    ) -> tuple[ClaimDecision, IdempotencyEntry]:
        name = self._layout.idempotency(key)
        fresh = in_flight_claim(key, run_id, moment, ttl_hours)
        keep = ttl_hours * 3600 + self._retention_s
        for _ in range(MAX_ATTEMPTS):
            blob = self._backend.get(name)
            current = None
            if blob is not None:
                current = _Entry.decode(blob.data, self._backend.describe(name)).entry(key)
            # The run holds its local writer lock; a holder proved dead on this host is not running.
            decision = decide(current, dedup_on, moment, holder_dead=holder_is_dead)
            if not decision.proceed:
                assert current is not None  # no entry always proceeds
                return decision, current
            try:
                # A create when there was nothing (another machine may create it first), else a
                # take-over of exactly the generation read (another may have taken it or finished it).
                self._backend.put(
                    name, _Entry.of(fresh).encode(), expect=None if blob is None else blob.generation,
                    ttl_seconds=keep,
                )
            except PreconditionFailed:
                continue  # someone else wrote it since we read it: read what they wrote
            return decision, fresh
        raise RemoteStateError(
            f"idempotency key {key!r} kept changing on {self._backend.location} while this run claimed it",
            hint="another run is claiming the same key right now; retry the run",
        )

    def finalize(self, key: str, run_id: str, succeeded: bool, now: datetime) -> bool:
        """Close ``run_id``'s claim remotely and locally; False when the key is no longer ``run_id``'s."""
        try:
            remote = call_with_deadline(
                lambda: self._finalize(key, run_id, succeeded, utc(now)),
                self._timeout, f"finalizing idempotency key {key!r}",
            )
        except RemoteStateError as exc:
            # The run's work is done: report, and let the in-flight TTL free the key.
            log.warning(
                f"could not record the outcome of idempotency key {key!r} remotely ({exc}); the key stays "
                "in flight until in_flight_ttl_hours passes"
            )
            remote = False
        local = self._local.finalize(key, run_id, succeeded, now)
        return remote and local

    def _finalize(self, key: str, run_id: str, succeeded: bool, moment: datetime) -> bool:
        name = self._layout.idempotency(key)
        for _ in range(MAX_ATTEMPTS):
            blob = self._backend.get(name)
            if blob is None:
                return False
            current = _Entry.decode(blob.data, self._backend.describe(name))
            if current.run_id != run_id:
                return False  # adopted by another run after ours outlived the TTL
            done = _Entry(
                SUCCEEDED if succeeded else FAILED, run_id, current.claimed_at, current.expires_at,
                to_db(moment),
            )
            try:
                self._backend.put(name, done.encode(), expect=blob.generation, ttl_seconds=self._retention_s)
            except PreconditionFailed:
                continue
            return True
        return False


class RemoteClaims:
    """Named leases on the remote backend: at most one live holder per key across every machine.

    A lease is ``{"value": ..., "expires_at": <unix seconds>}``. valkey also expires the key itself; on
    S3 an expired lease stays until the next claim replaces it (conditionally, so two machines taking
    over the same expired lease cannot both win).
    """

    def __init__(
        self,
        backend: RemoteBackend,
        layout: RemoteLayout,
        *,
        timeout_seconds: float = 300,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._backend = backend
        self._layout = layout
        self._timeout = timeout_seconds
        self._clock = clock

    def remote_claim(self, key: str, value: str, ttl: float) -> bool:
        """Take ``key`` for ``value`` for ``ttl`` seconds.

        Returns True when this call holds the lease (it was free, expired, or already ``value``'s, in
        which case it is extended); False when another holder's lease is live.
        """
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, not {ttl}")
        return call_with_deadline(lambda: self._claim(key, value, ttl), self._timeout, f"claiming {key!r}")

    def _claim(self, key: str, value: str, ttl: float) -> bool:
        name = self._layout.lock(key)
        now = self._clock()
        lease = json.dumps({"value": value, "expires_at": now + ttl}).encode()
        for _ in range(MAX_ATTEMPTS):
            try:
                self._backend.put(name, lease, expect=None, ttl_seconds=ttl)
                return True
            except PreconditionFailed:
                pass
            blob = self._backend.get(name)
            if blob is None:
                continue  # released between our create and our read
            holder = _lease(blob.data)
            if holder is not None and holder[1] > now and holder[0] != value:
                return False
            try:
                self._backend.put(name, lease, expect=blob.generation, ttl_seconds=ttl)
                return True
            except PreconditionFailed:
                continue
        return False

    def remote_get(self, key: str) -> str | None:
        """The live holder's value of ``key``; None when it is free or expired."""
        blob = call_with_deadline(
            lambda: self._backend.get(self._layout.lock(key)), self._timeout, f"reading {key!r}"
        )
        holder = None if blob is None else _lease(blob.data)
        if holder is None or holder[1] <= self._clock():
            return None
        return holder[0]

    def remote_release(self, key: str, value: str | None = None) -> bool:
        """Free ``key``; with ``value``, only if ``value`` still holds it. True when this call freed it."""
        return call_with_deadline(lambda: self._release(key, value), self._timeout, f"releasing {key!r}")

    def _release(self, key: str, value: str | None) -> bool:
        name = self._layout.lock(key)
        if value is None:
            self._backend.delete(name, expect=ANY)
            return True
        blob = self._backend.get(name)
        if blob is None:
            return False
        holder = _lease(blob.data)
        if holder is None or holder[0] != value:
            return False
        try:
            self._backend.delete(name, expect=blob.generation)
        except PreconditionFailed:
            return False
        return True


def _lease(data: bytes) -> tuple[str, float] | None:
    """``(value, expires_at)`` of a stored lease; None for bytes that are not one (treated as free)."""
    try:
        doc: Any = json.loads(data)
        return str(doc["value"]), float(doc["expires_at"])
    except (ValueError, KeyError, TypeError):
        return None
