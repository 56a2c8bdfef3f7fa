"""``rocky serve``'s jobs (table ``jobs``, local-only): one row per child run the server launched.

A job is an API run (``kind = "run"``, ``POST /api/v1/jobs/run``) or a scheduled run of the resident
scheduler (``kind = "schedule"`` or ``"webhook"``, ``job_id`` = the submission id). The child holds the
state store's writer lock while it runs, so a row is written before the child starts (``running``) and
finalized after it ends; ``owner`` names the server process that launched it, so a restarted (or second)
server can tell a job it can no longer see from one another live server is still watching.

Build it with ``JobRepo(store)``; writes are one transaction each.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from rocky_engine.redact import known
from rocky_engine.state._time import from_db, from_db_opt, to_db, to_db_opt

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

JobState = Literal["queued", "running", "succeeded", "failed"]
JOB_STATES: tuple[JobState, ...] = ("queued", "running", "succeeded", "failed")
UNFINISHED: tuple[JobState, ...] = ("queued", "running")

_COLUMNS = (
    "job_id", "kind", "state", "submitted_at", "started_at", "finished_at", "pipeline", "request", "result",
    "error", "pid", "owner", "attempts",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM jobs"
_UPSERT = (
    f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
    "ON CONFLICT (job_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)


@dataclass(frozen=True)
class JobRow:
    """One job; datetimes are UTC."""

    job_id: str
    kind: str
    state: JobState
    submitted_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    pipeline: str | None = None
    #: what asked for the job: the API body, or ``{trigger, attempt}`` for a scheduled run
    request: dict[str, Any] = field(default_factory=dict)
    #: the outcome document once finished
    result: dict[str, Any] | None = None
    error: str | None = None
    #: the child's pid (written when the job is finalized: the child holds the store while it runs)
    pid: int | None = None
    #: ``{pid, hostname, started_at}`` of the server process that launched the job
    owner: dict[str, Any] | None = None
    attempts: int = 1

    def with_(self, **changes: Any) -> JobRow:
        return replace(self, **changes)

    @property
    def finished(self) -> bool:
        return self.state in ("succeeded", "failed")


class JobRepo:
    """Reads and writes ``jobs``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def upsert(self, row: JobRow) -> None:
        """Insert the job, or replace every column of an existing one (a retry, a finalization)."""
        with self._store.transaction() as conn:
            conn.execute(_UPSERT, _to_row(row))

    def upsert_many(self, rows: builtins.list[JobRow]) -> None:
        if not rows:
            return
        with self._store.transaction() as conn:
            conn.executemany(_UPSERT, [_to_row(r) for r in rows])

    def get(self, job_id: str) -> JobRow | None:
        rows = self._store.query(f"{_SELECT} WHERE job_id = ?", (job_id,))
        return self._store.first(rows, _from_row)

    def list(self, limit: int = 50, state: str | None = None) -> builtins.list[JobRow]:
        """Newest submitted first."""
        if state is None:
            rows = self._store.query(f"{_SELECT} ORDER BY submitted_at DESC, job_id LIMIT ?", (limit,))
        else:
            rows = self._store.query(
                f"{_SELECT} WHERE state = ? ORDER BY submitted_at DESC, job_id LIMIT ?", (state, limit)
            )
        return self._store.decoded(rows, _from_row)

    def unfinished(self) -> builtins.list[JobRow]:
        """Jobs still ``queued`` or ``running`` (oldest first)."""
        rows = self._store.query(
            f"{_SELECT} WHERE state IN ('queued', 'running') ORDER BY submitted_at, job_id"
        )
        return self._store.decoded(rows, _from_row)

    def counts(self) -> dict[str, int]:
        """Number of jobs per state (every state present, zero when none)."""
        counts: dict[str, int] = dict.fromkeys(JOB_STATES, 0)
        for row in self._store.query("SELECT state, COUNT(*) FROM jobs GROUP BY state"):
            counts[str(row[0])] = int(row[1])
        return counts


def _dump(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), default=str)


def _load(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"unreadable": text[:200]}
    return value if isinstance(value, dict) else {"value": value}


def _to_row(row: JobRow) -> tuple[Any, ...]:
    # A job's result and error carry what its run printed: stored redacted (rocky_engine/redact.py)
    secrets = known()
    return (
        row.job_id, row.kind, row.state, to_db(row.submitted_at), to_db_opt(row.started_at),
        to_db_opt(row.finished_at), row.pipeline, _dump(secrets.deep(row.request)),
        _dump(secrets.deep(row.result)), secrets.deep(row.error), row.pid, _dump(row.owner), row.attempts,
    )


def _from_row(row: sqlite3.Row) -> JobRow:
    stored = str(row["state"])
    state: JobState = next((s for s in JOB_STATES if s == stored), "failed")
    return JobRow(
        job_id=str(row["job_id"]),
        kind=str(row["kind"]),
        state=state,
        submitted_at=from_db(row["submitted_at"]),
        started_at=from_db_opt(row["started_at"]),
        finished_at=from_db_opt(row["finished_at"]),
        pipeline=row["pipeline"],
        request=_load(row["request"]) or {},
        result=_load(row["result"]),
        error=row["error"],
        pid=row["pid"],
        owner=_load(row["owner"]),
        attempts=int(row["attempts"] or 1),
    )
