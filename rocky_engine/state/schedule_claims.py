"""Scheduler claims (``schedule_claims``): one owner per demand, written before the child starts.

States: ``submitted`` (a reconciler took the demand and is about to run or is running it), then
``completed`` with an ``outcome`` (success | partial | failure) or ``released`` (finalized without a run:
a webhook demand for a removed pipeline). The key is ``<pipeline>|cron|<occurrence>`` for a cron
occurrence, ``<pipeline>|after|<tick instant>`` / ``<pipeline>|freshness|<tick instant>`` for demand that
recurs until the pipeline succeeds, and ``webhook|<demand_uid>`` for a webhook demand, so a second
reconciler that meets the same occurrence or demand finds the row and does not run it again.

Build it with ``ClaimRepo(store)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from rocky_engine.state._time import from_db, from_db_opt, to_db, to_db_opt

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

ClaimState = Literal["submitted", "completed", "released"]
Outcome = Literal["success", "partial", "failure"]

_COLUMNS = (
    "claim_key", "pipeline", "source", "logical_ts", "submission_id", "state", "outcome", "exit_code",
    "created_at", "updated_at", "attempts",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM schedule_claims"


@dataclass(frozen=True)
class Claim:
    """One claim row; datetimes are UTC."""

    claim_key: str
    pipeline: str
    source: str
    logical_ts: datetime | None
    submission_id: str
    state: ClaimState
    outcome: Outcome | None
    exit_code: int | None
    created_at: datetime
    updated_at: datetime
    attempts: int


class ClaimRepo:
    """Reads and writes ``schedule_claims``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def get(self, claim_key: str) -> Claim | None:
        rows = self._store.query(f"{_SELECT} WHERE claim_key = ?", (claim_key,))
        return self._store.first(rows, _from_row)

    def by_submission(self, submission_id: str) -> Claim | None:
        rows = self._store.query(
            f"{_SELECT} WHERE submission_id = ? ORDER BY created_at DESC LIMIT 1", (submission_id,)
        )
        return self._store.first(rows, _from_row)

    def submitted(self, pipeline: str | None = None) -> list[Claim]:
        """Claims still ``submitted`` (in flight, or left behind by a reconciler that died), oldest first."""
        if pipeline is None:
            rows = self._store.query(f"{_SELECT} WHERE state = 'submitted' ORDER BY created_at, claim_key")
        else:
            rows = self._store.query(
                f"{_SELECT} WHERE state = 'submitted' AND pipeline = ? ORDER BY created_at, claim_key",
                (pipeline,),
            )
        return self._store.decoded(rows, _from_row)

    def recent(self, limit: int = 100, pipeline: str | None = None) -> list[Claim]:
        """The newest claims (any state), newest first."""
        if pipeline is None:
            rows = self._store.query(f"{_SELECT} ORDER BY created_at DESC LIMIT ?", (limit,))
        else:
            rows = self._store.query(
                f"{_SELECT} WHERE pipeline = ? ORDER BY created_at DESC LIMIT ?", (pipeline, limit)
            )
        return self._store.decoded(rows, _from_row)

    def submit(
        self,
        *,
        claim_key: str,
        pipeline: str,
        source: str,
        logical_ts: datetime | None,
        submission_id: str,
        now: datetime,
        attempts: int = 1,
    ) -> bool:
        """Insert a ``submitted`` claim; False when the key is already claimed (by anyone, in any state)."""
        with self._store.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO schedule_claims (claim_key, pipeline, source, logical_ts, submission_id, state, "
                "created_at, updated_at, attempts) VALUES (?, ?, ?, ?, ?, 'submitted', ?, ?, ?) "
                "ON CONFLICT (claim_key) DO NOTHING",
                (
                    claim_key, pipeline, source, to_db_opt(logical_ts), submission_id, to_db(now),
                    to_db(now), attempts,
                ),
            )
            return cur.rowcount == 1

    def record_attempt(self, claim_key: str, attempts: int, now: datetime) -> None:
        """A retry of the same demand is starting: keep the claim ``submitted`` and count the attempt."""
        with self._store.transaction() as conn:
            conn.execute(
                "UPDATE schedule_claims SET attempts = ?, updated_at = ? "
                "WHERE claim_key = ? AND state = 'submitted'",
                (attempts, to_db(now), claim_key),
            )

    def complete(
        self, claim_key: str, outcome: Outcome, exit_code: int | None, attempts: int | None, now: datetime
    ) -> bool:
        """``submitted`` -> ``completed{outcome}``; False when the claim was already finalized."""
        with self._store.transaction() as conn:
            cur = conn.execute(
                "UPDATE schedule_claims SET state = 'completed', outcome = ?, exit_code = ?, "
                "attempts = COALESCE(?, attempts), updated_at = ? "
                "WHERE claim_key = ? AND state = 'submitted'",
                (outcome, exit_code, attempts, to_db(now), claim_key),
            )
            return cur.rowcount == 1

    def release(self, claim_key: str, now: datetime) -> bool:
        """``submitted`` -> ``released`` (finalized without a run)."""
        with self._store.transaction() as conn:
            cur = conn.execute(
                "UPDATE schedule_claims SET state = 'released', updated_at = ? "
                "WHERE claim_key = ? AND state = 'submitted'",
                (to_db(now), claim_key),
            )
            return cur.rowcount == 1


def _from_row(r: Any) -> Claim:
    return Claim(
        claim_key=r["claim_key"],
        pipeline=r["pipeline"],
        source=r["source"],
        logical_ts=from_db_opt(r["logical_ts"]),
        submission_id=r["submission_id"],
        state=r["state"],
        outcome=r["outcome"],
        exit_code=r["exit_code"],
        created_at=from_db(r["created_at"]),
        updated_at=from_db(r["updated_at"]),
        attempts=int(r["attempts"]),
    )
