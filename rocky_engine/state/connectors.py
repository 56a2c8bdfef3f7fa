"""``connector_state``: the saved state of each child connector and its ``commit_seq`` fence.

A connector run reads its row (``commit_seq`` N; none means a new connector at 0), claims the batch key
``connector:<name>:<N>`` in ``idempotency_keys``, and after the promote commits the program's new state as
``commit_seq`` N + 1. The commit is refused when ``commit_seq`` is no longer N: something else moved the
state since the claim (seeds/child-connectors.md "What Rocky guarantees"). The fence check, the state
write and the claim's finalization are one transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rocky_engine.errors import StateError
from rocky_engine.state._time import from_db, to_db, utc

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

#: Every connector batch key starts with this.
CLAIM_PREFIX = "connector:"


def claim_key(name: str, commit_seq: int) -> str:
    """The idempotency key of the batch a run of ``name`` at ``commit_seq`` loads."""
    return f"{CLAIM_PREFIX}{name}:{commit_seq}"


class CommitFenceError(StateError):
    """The state moved since the claim; committing would overwrite another run's state."""


@dataclass(frozen=True)
class ConnectorState:
    """One saved connector state."""

    name: str
    commit_seq: int
    schema_version: int
    value_json: str
    run_id: str | None
    committed_at: datetime

    @property
    def value(self) -> Any:
        return json.loads(self.value_json)


class ConnectorStateRepo:
    """Reads and writes ``connector_state``; ``ConnectorStateRepo(store)``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def get(self, name: str) -> ConnectorState | None:
        rows = self._store.query(
            "SELECT name, commit_seq, schema_version, value, run_id, committed_at FROM connector_state "
            "WHERE name = ?",
            (name,),
        )
        return self._store.first(rows, _row)

    def all(self) -> list[ConnectorState]:
        rows = self._store.query(
            "SELECT name, commit_seq, schema_version, value, run_id, committed_at FROM connector_state "
            "ORDER BY name"
        )
        return self._store.decoded(rows, _row)

    def commit(
        self,
        name: str,
        *,
        expected_seq: int,
        schema_version: int,
        value_json: str,
        run_id: str,
        now: datetime,
    ) -> int:
        """Save the new state as ``expected_seq + 1`` and finalize the batch claim as succeeded.

        Returns:
            the new ``commit_seq``.

        Raises:
            CommitFenceError: ``commit_seq`` is no longer ``expected_seq``.
        """
        key = claim_key(name, expected_seq)
        with self._store.transaction() as conn:
            row = conn.execute("SELECT commit_seq FROM connector_state WHERE name = ?", (name,)).fetchone()
            current = int(row[0]) if row is not None else 0
            if current != expected_seq:
                raise CommitFenceError(
                    f"connector '{name}': commit_seq moved from {expected_seq} to {current} since this run "
                    "claimed its batch; the state commit is refused",
                    hint="another run committed in between (or the state was restored); the rows of this "
                    "run are in the target table and may be duplicates",
                )
            new_seq = expected_seq + 1
            stamp = to_db(now)
            conn.execute(
                "INSERT INTO connector_state (name, commit_seq, schema_version, value, run_id, "
                "committed_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "commit_seq = excluded.commit_seq, schema_version = excluded.schema_version, "
                "value = excluded.value, run_id = excluded.run_id, committed_at = excluded.committed_at",
                (name, new_seq, schema_version, value_json, run_id, stamp),
            )
            conn.execute(
                "UPDATE idempotency_keys SET state = 'succeeded', finished_at = ? "
                "WHERE key = ? AND run_id = ?",
                (stamp, key, run_id),
            )
            return new_seq

    def live_claim_run_ids(self, now: datetime) -> set[str]:
        """Run ids holding an unexpired in-flight connector claim (their staging tables may be in use)."""
        rows = self._store.query(
            "SELECT run_id FROM idempotency_keys WHERE key LIKE ? AND state = 'in_flight' AND expires_at > ?",
            (CLAIM_PREFIX + "%", to_db(utc(now))),
        )
        return {str(r[0]) for r in rows}


def _row(r: Any) -> ConnectorState:
    return ConnectorState(
        name=str(r["name"]),
        commit_seq=int(r["commit_seq"]),
        schema_version=int(r["schema_version"]),
        value_json=str(r["value"]),
        run_id=r["run_id"],
        committed_at=from_db(r["committed_at"]),
    )
