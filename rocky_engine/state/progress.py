"""Per-table progress of a run, the basis of ``--resume`` / ``--resume-latest`` (CONTRACT section 3).

A replication runner records each table as it finishes, so a run killed halfway leaves the tables it
completed even though it never wrote its run record. A resumed run skips ``completed_keys`` of the run it
resumes from and mints a new run id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rocky_engine.state._time import from_db, now_utc, to_db

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

SUCCESS = "success"
FAILED = "failed"
SKIPPED = "skipped"


@dataclass(frozen=True)
class ProgressEntry:
    """The outcome of one task (table or model) of a run."""

    key: str
    status: str
    rows: int | None = None
    error: str | None = None
    finished_at: datetime | None = None


class ProgressRepo:
    """Reads and writes ``run_progress``; reached as ``store.progress``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def record(
        self,
        run_id: str,
        key: str,
        status: str,
        rows: int | None = None,
        error: str | None = None,
        *,
        pipeline: str | None = None,
        now: datetime | None = None,
    ) -> None:
        """Record (or overwrite, on a retry within the run) one task's outcome, in its own transaction."""
        self.record_many(run_id, [ProgressEntry(key, status, rows, error)], pipeline=pipeline, now=now)

    def record_many(
        self,
        run_id: str,
        entries: Iterable[ProgressEntry],
        *,
        pipeline: str | None = None,
        now: datetime | None = None,
    ) -> None:
        """Record several outcomes in one transaction. ``pipeline`` makes the run findable by
        :meth:`latest_run_id`."""
        default_stamp = now or now_utc()
        rows = [
            (run_id, e.key, pipeline, e.status, e.rows, to_db(e.finished_at or default_stamp), e.error)
            for e in entries
        ]
        if not rows:
            return
        with self._store.transaction() as conn:
            conn.executemany(
                "INSERT INTO run_progress (run_id, key, pipeline, status, rows, finished_at, error) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, key) DO UPDATE SET "
                "pipeline = excluded.pipeline, status = excluded.status, rows = excluded.rows, "
                "finished_at = excluded.finished_at, error = excluded.error",
                rows,
            )

    def entries(self, run_id: str) -> list[ProgressEntry]:
        """Every recorded task of ``run_id``, ordered by key."""
        rows = self._store.query(
            "SELECT key, status, rows, error, finished_at FROM run_progress WHERE run_id = ? ORDER BY key",
            (run_id,),
        )
        with self._store.decoding():
            return [
                ProgressEntry(r["key"], r["status"], r["rows"], r["error"], from_db(r["finished_at"]))
                for r in rows
            ]

    def completed_keys(self, run_id: str) -> set[str]:
        """The tasks ``run_id`` finished successfully: what a resumed run skips."""
        rows = self._store.query(
            "SELECT key FROM run_progress WHERE run_id = ? AND status = ?", (run_id, SUCCESS)
        )
        return {str(r["key"]) for r in rows}

    def has_run(self, run_id: str) -> bool:
        """Whether ``run_id`` recorded any progress (``--resume ID`` of an unknown id is an error)."""
        rows = self._store.query("SELECT 1 FROM run_progress WHERE run_id = ? LIMIT 1", (run_id,))
        return bool(rows)

    def latest_run_id(self, pipeline: str | None) -> str | None:
        """The newest run of ``pipeline`` that recorded progress (run ids sort by start time)."""
        rows = self._store.query(
            "SELECT run_id FROM run_progress WHERE pipeline IS ? ORDER BY run_id DESC LIMIT 1", (pipeline,)
        )
        return str(rows[0]["run_id"]) if rows else None
