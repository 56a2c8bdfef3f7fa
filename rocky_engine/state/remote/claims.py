"""Claims that hold across machines: idempotency keys and named leases on the remote backend.

A local claim is a SQLite transaction, which only serialises processes that share one state file. On a
remote backend two machines have two files, so the claim lives on the backend and is taken with an
atomic conditional write: a create is S3 ``If-None-Match: *`` / valkey ``SET NX``, and a take-over of a
failed or expired entry is a replace conditional on the generation that was read (S3 ``If-Match`` /
a valkey compare-and-set script). Of two machines racing for one key, exactly one write lands.

- :class:`RemoteIdempotency` is ``store.idempotency`` for a run on a remote backend (installed by
  ``sync.open_synced_store``): the CONTRACT section 3 decision table evaluated on the remote entry, with
  the outcome mirrored into the local ``idempotency_keys`` table.
- :class:`RemoteClaims` is the generic primitive (``remote_claim`` / ``remote_get`` / ``remote_release``)
  for other exactly-once work such as connector claims.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from rocky_engine.logs import get_logger
from rocky_engine.state._time import from_db, to_db, utc
from rocky_engine.state.idempotency import (
    FAILED,
    IN_FLIGHT,
    SUCCEEDED,
    ClaimDecision,
    DedupOn,
    IdempotencyRepo,
)
from rocky_engine.state.remote.backend import (
    ANY,
    PreconditionFailed,
    RemoteBackend,
    RemoteLayout,
    RemoteStateError,
    call_with_deadline,
)

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

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

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> _Entry:
        try:
            doc = json.loads(data)
            return cls(
                state=str(doc["state"]), run_id=str(doc["run_id"]), claimed_at=str(doc["claimed_at"]),
                expires_at=str(doc["expires_at"]), finished_at=doc.get("finished_at"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteStateError(
                f"the idempotency entry at {where} is not readable ({exc})",
                hint="delete that object to let the key run again",
            ) from None


class RemoteIdempotency(IdempotencyRepo):
    """Idempotency keys claimed on the remote backend, atomically across machines."""

    def __init__(
        self,
        store: StateStore,
        backend: RemoteBackend,
        layout: RemoteLayout,
        *,
        retention_days: float,
        timeout_seconds: float,
    ) -> None:
        super().__init__(store)
        self._backend = backend
        self._layout = layout
        self._retention_s = retention_days * 86400
        self._timeout = timeout_seconds

    def claim(
        self, key: str, run_id: str, *, now: datetime, ttl_hours: float, dedup_on: DedupOn = "success"
    ) -> ClaimDecision:
        """Decide on the remote entry whether ``run_id`` may run under ``key``, and claim it if so."""
        if dedup_on not in ("success", "any"):
            raise ValueError(f"dedup_on must be 'success' or 'any', not {dedup_on!r}")
        if ttl_hours <= 0:
            raise ValueError(f"ttl_hours must be positive, not {ttl_hours}")
        decision, entry = call_with_deadline(
            lambda: self._claim(key, run_id, utc(now), ttl_hours, dedup_on),
            self._timeout, f"claiming idempotency key {key!r}",
        )
        self._mirror(key, entry)
        return decision

    def _claim(
        self, key: str, run_id: str, moment: datetime, ttl_hours: float, dedup_on: DedupOn
    ) -> tuple[ClaimDecision, _Entry]:
        name = self._layout.idempotency(key)
        fresh = _Entry(IN_FLIGHT, run_id, to_db(moment), to_db(moment + timedelta(hours=ttl_hours)))
        keep = ttl_hours * 3600 + self._retention_s
        for _ in range(MAX_ATTEMPTS):
            blob = self._backend.get(name)
            if blob is None:
                try:
                    self._backend.put(name, fresh.encode(), expect=None, ttl_seconds=keep)
                except PreconditionFailed:
                    continue  # another machine created it first: read what it wrote
                return ClaimDecision(proceed=True, outcome="claimed"), fresh
            current = _Entry.decode(blob.data, self._backend.describe(name))
            decision = _decide(current, moment, dedup_on)
            if not decision.proceed:
                return decision, current
            try:
                self._backend.put(name, fresh.encode(), expect=blob.generation, ttl_seconds=keep)
            except PreconditionFailed:
                continue  # someone else took it over (or finished it) since we read it
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
        local = super().finalize(key, run_id, succeeded, now)
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

    def _mirror(self, key: str, entry: _Entry) -> None:
        """Keep the local table in step with the remote entry (history, peeks, the next upload)."""
        with self._store.transaction() as conn:
            conn.execute(
                "INSERT INTO idempotency_keys (key, state, run_id, claimed_at, expires_at, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET state = excluded.state, "
                "run_id = excluded.run_id, claimed_at = excluded.claimed_at, "
                "expires_at = excluded.expires_at, finished_at = excluded.finished_at",
                (key, entry.state, entry.run_id, entry.claimed_at, entry.expires_at, entry.finished_at),
            )


def _decide(current: _Entry, moment: datetime, dedup_on: DedupOn) -> ClaimDecision:
    """CONTRACT section 3: what a run does with a key that already has an entry."""
    if current.state == SUCCEEDED or (current.state == FAILED and dedup_on == "any"):
        return ClaimDecision(proceed=False, outcome="skipped_idempotent", skipped_by_run_id=current.run_id)
    if current.state == IN_FLIGHT and moment < from_db(current.expires_at):
        return ClaimDecision(proceed=False, outcome="skipped_in_flight", skipped_by_run_id=current.run_id)
    if current.state == IN_FLIGHT:
        return ClaimDecision(proceed=True, outcome="adopted", adopted=True, previous_run_id=current.run_id)
    return ClaimDecision(proceed=True, outcome="reclaimed", previous_run_id=current.run_id)


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
