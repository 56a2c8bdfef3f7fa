"""Idempotency keys (CONTRACT section 3 "Idempotency"): a run claims its key before doing any work.

Claiming is one ``BEGIN IMMEDIATE`` transaction, so two processes that race on the same key see each
other's claim: exactly one proceeds.

=====================  ===================  ==================================
entry                  dedup_on = success   dedup_on = any
=====================  ===================  ==================================
none                   claim, proceed       claim, proceed
succeeded              skip (Idempotent)    skip (Idempotent)
failed                 re-claim, proceed    skip (Idempotent)
in_flight, live        skip (InFlight)      skip (InFlight)
in_flight, expired     adopt, proceed       adopt, proceed
=====================  ===================  ==================================

A skip writes no run record and fires no hooks; the runner finalizes the claim on every exit path.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from rocky_engine.state._time import from_db, from_db_opt, to_db, utc

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

DedupOn = Literal["success", "any"]
ClaimOutcome = Literal["claimed", "reclaimed", "adopted", "skipped_idempotent", "skipped_in_flight"]

IN_FLIGHT = "in_flight"
SUCCEEDED = "succeeded"
FAILED = "failed"


@dataclass(frozen=True)
class ClaimDecision:
    """What a run does with its idempotency key."""

    proceed: bool
    outcome: ClaimOutcome
    #: The run that holds (or held) the key when this run skips.
    skipped_by_run_id: str | None = None
    #: True when an expired in-flight claim was taken over (log a warning: its run may have died midway).
    adopted: bool = False
    #: The run whose failed or expired claim this run took over.
    previous_run_id: str | None = None

    @property
    def skip_status(self) -> str | None:
        """The run status of a skip (``SkippedIdempotent`` / ``SkippedInFlight``), ``None`` to proceed."""
        if self.outcome == "skipped_idempotent":
            return "SkippedIdempotent"
        if self.outcome == "skipped_in_flight":
            return "SkippedInFlight"
        return None


@dataclass(frozen=True)
class IdempotencyEntry:
    """One stored key."""

    key: str
    state: str
    run_id: str
    claimed_at: datetime
    expires_at: datetime
    finished_at: datetime | None


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
        if dedup_on not in ("success", "any"):
            raise ValueError(f"dedup_on must be 'success' or 'any', not {dedup_on!r}")
        if ttl_hours <= 0:
            raise ValueError(f"ttl_hours must be positive, not {ttl_hours}")
        moment = utc(now)
        claimed_at = to_db(moment)
        expires_at = to_db(moment + timedelta(hours=ttl_hours))
        with self._store.transaction() as conn:
            row = conn.execute(
                "SELECT state, run_id, expires_at FROM idempotency_keys WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO idempotency_keys (key, state, run_id, claimed_at, expires_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (key, IN_FLIGHT, run_id, claimed_at, expires_at),
                )
                return ClaimDecision(proceed=True, outcome="claimed")
            state, holder = str(row["state"]), str(row["run_id"])
            if state == SUCCEEDED or (state == FAILED and dedup_on == "any"):
                return ClaimDecision(proceed=False, outcome="skipped_idempotent", skipped_by_run_id=holder)
            if state == IN_FLIGHT and moment < from_db(row["expires_at"]):
                return ClaimDecision(proceed=False, outcome="skipped_in_flight", skipped_by_run_id=holder)
            # A failed key under "success", or an in-flight claim whose run outlived the TTL (it died,
            # or hangs): take it over.
            conn.execute(
                "UPDATE idempotency_keys SET state = ?, run_id = ?, claimed_at = ?, expires_at = ?, "
                "finished_at = NULL WHERE key = ?",
                (IN_FLIGHT, run_id, claimed_at, expires_at, key),
            )
            if state == IN_FLIGHT:
                return ClaimDecision(proceed=True, outcome="adopted", adopted=True, previous_run_id=holder)
            return ClaimDecision(proceed=True, outcome="reclaimed", previous_run_id=holder)

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
        rows = self._store.query(
            "SELECT key, state, run_id, claimed_at, expires_at, finished_at FROM idempotency_keys "
            "WHERE key = ?",
            (key,),
        )
        if not rows:
            return None
        r = rows[0]
        return IdempotencyEntry(
            key=r["key"], state=r["state"], run_id=r["run_id"], claimed_at=from_db(r["claimed_at"]),
            expires_at=from_db(r["expires_at"]), finished_at=from_db_opt(r["finished_at"]),
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
