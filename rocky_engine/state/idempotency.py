"""Idempotency keys in the local store (CONTRACT section 3 "Idempotency"): a run claims its key before
doing any work.

Claiming is one ``BEGIN IMMEDIATE`` transaction that reads the entry, asks the decision table
(``state.idempotency_decision.decide``) and writes the claim, so two processes that race on the same key
see each other's claim: exactly one proceeds. On a remote backend the claim is taken there instead
(``state.remote.claims.RemoteIdempotency``); both are an :class:`IdempotencyBackend`, and the caller is
handed the one to use (``SyncedStore.idempotency``).

A skip writes no run record and fires no hooks; the runner finalizes the claim on every exit path.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from rocky_engine.process.identity import Holder, provably_dead, this_process
from rocky_engine.state._time import from_db, from_db_opt, to_db, to_db_opt, utc
from rocky_engine.state.idempotency_decision import (
    FAILED,
    IN_FLIGHT,
    SUCCEEDED,
    ClaimDecision,
    ClaimOutcome,
    DedupOn,
    IdempotencyEntry,
    decide,
)

if TYPE_CHECKING:
    import sqlite3

    from rocky_engine.state.store import StateStore

__all__ = [
    "FAILED", "IN_FLIGHT", "SUCCEEDED", "ClaimDecision", "ClaimOutcome", "DedupOn", "IdempotencyBackend",
    "IdempotencyEntry", "IdempotencyRepo",
]


class IdempotencyBackend(Protocol):
    """Where a run's idempotency key is claimed and finalized: the local store or a remote backend."""

    def claim(
        self, key: str, run_id: str, *, now: datetime, ttl_hours: float, dedup_on: DedupOn = "success"
    ) -> ClaimDecision: ...

    def finalize(self, key: str, run_id: str, succeeded: bool, now: datetime) -> bool: ...


class IdempotencyRepo:
    """Reads and writes ``idempotency_keys``; reached as ``store.idempotency``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def claim(
        self, key: str, run_id: str, *, now: datetime, ttl_hours: float, dedup_on: DedupOn = "success"
    ) -> ClaimDecision:
        """Decide, in one transaction, whether ``run_id`` may run under ``key``, and claim it if so.

        Args:
            key: the idempotency key.
            run_id: the run asking.
            now: the current time (injected).
            ttl_hours: how long an in-flight claim holds before another run may adopt it.
            dedup_on: ``"success"`` lets a failed key run again; ``"any"`` treats a failure as done.
        """
        check_ttl(ttl_hours)
        moment = utc(now)
        with self._store.transaction() as conn:
            with self._store.decoding():
                current = _entry(conn.execute(_SELECT, (key,)).fetchone())
            # This process holds the writer lock: a holder proved dead cannot still be writing its run.
            decision = decide(current, dedup_on, moment, holder_dead=holder_is_dead)
            if decision.proceed:
                self._put(conn, in_flight_claim(key, run_id, moment, ttl_hours))
            return decision

    def finalize(self, key: str, run_id: str, succeeded: bool, now: datetime) -> bool:
        """Close ``run_id``'s claim as succeeded or failed.

        Returns False (and changes nothing) when the key is not held by ``run_id``, e.g. another run
        adopted it after this one outlived the TTL. Calling it twice is harmless.
        """
        with self._store.transaction() as conn:
            cursor = conn.execute(
                "UPDATE idempotency_keys SET state = ?, finished_at = ? WHERE key = ? AND run_id = ?",
                (SUCCEEDED if succeeded else FAILED, to_db(now), key, run_id),
            )
            return cursor.rowcount > 0

    def get(self, key: str) -> IdempotencyEntry | None:
        rows = self._store.query(_SELECT, (key,))
        return self._store.first(rows, _entry)

    def put(self, entry: IdempotencyEntry) -> None:
        """Store ``entry`` as it is (the local mirror of a claim taken on a remote backend)."""
        with self._store.transaction() as conn:
            self._put(conn, entry)

    @staticmethod
    def _put(conn: sqlite3.Connection, entry: IdempotencyEntry) -> None:
        conn.execute(
            "INSERT INTO idempotency_keys (key, state, run_id, claimed_at, expires_at, finished_at, holder) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET state = excluded.state, "
            "run_id = excluded.run_id, claimed_at = excluded.claimed_at, "
            "expires_at = excluded.expires_at, finished_at = excluded.finished_at, holder = excluded.holder",
            (entry.key, entry.state, entry.run_id, to_db(entry.claimed_at), to_db(entry.expires_at),
             to_db_opt(entry.finished_at), entry.holder),
        )

    def prune(self, retention_days: float, now: datetime) -> int:
        """Forget finished keys older than ``retention_days`` (and in-flight claims expired that long ago).

        Returns the number of keys removed. A pruned key can run again.
        """
        cutoff = to_db(utc(now) - timedelta(days=retention_days))
        with self._store.transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM idempotency_keys WHERE (state != ? AND finished_at < ?) "
                "OR (state = ? AND expires_at < ?)",
                (IN_FLIGHT, cutoff, IN_FLIGHT, cutoff),
            )
            return cursor.rowcount


_SELECT = (
    "SELECT key, state, run_id, claimed_at, expires_at, finished_at, holder FROM idempotency_keys "
    "WHERE key = ?"
)


def _entry(row: sqlite3.Row | None) -> IdempotencyEntry | None:
    if row is None:
        return None
    return IdempotencyEntry(
        key=row["key"], state=row["state"], run_id=row["run_id"], claimed_at=from_db(row["claimed_at"]),
        expires_at=from_db(row["expires_at"]), finished_at=from_db_opt(row["finished_at"]),
        holder=row["holder"],
    )


def in_flight_claim(key: str, run_id: str, now: datetime, ttl_hours: float) -> IdempotencyEntry:
    """The entry of a claim ``run_id`` takes at ``now``: in flight until ``ttl_hours`` later."""
    moment = utc(now)
    return IdempotencyEntry(
        key=key, state=IN_FLIGHT, run_id=run_id, claimed_at=moment,
        expires_at=moment + timedelta(hours=ttl_hours), finished_at=None, holder=this_process().encode(),
    )


def holder_is_dead(holder: str | None) -> bool:
    """The claim's recorded holder is provably dead on this host (``process.identity``)."""
    recorded = Holder.decode(holder)
    return recorded is not None and provably_dead(recorded)


def check_ttl(ttl_hours: float) -> None:
    """Raises ValueError for a TTL that would make every claim expired at once."""
    if ttl_hours <= 0:
        raise ValueError(f"ttl_hours must be positive, not {ttl_hours}")
