"""The scheduler's cursor per pipeline (``schedule_state``): cron anchor, failure streak, pause, last tick.

One row per pipeline the reconciler has seen. The row is local-only (never uploaded by a remote backend).
``extra`` holds JSON for facts without a column of their own: ``next_fire_at`` (the projection of the next
cron occurrence after the anchor, which lets a tick with nothing due skip cron arithmetic entirely) and
``last_submission_id``.

Build it with ``ScheduleRepo(store)``. Writes that must commit together with a claim take the caller's
transaction (``store.transaction()`` nests through a savepoint).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rocky_engine.state._time import from_db, from_db_opt, to_db, to_db_opt

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

_COLUMNS = (
    "pipeline", "cron", "timezone", "cron_anchor", "last_fire", "last_fire_source", "consecutive_failures",
    "last_attempt_at", "last_outcome", "paused", "paused_at", "last_evaluated_at", "extra",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM schedule_state"
_UPSERT = (
    f"INSERT INTO schedule_state ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
    "ON CONFLICT (pipeline) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)


@dataclass(frozen=True)
class ScheduleRow:
    """One pipeline's scheduler cursor; datetimes are UTC."""

    pipeline: str
    cron: str | None = None
    timezone: str | None = None
    #: the last cron occurrence accounted for (fired or skipped); first sight records the tick instant
    cron_anchor: datetime | None = None
    last_fire: datetime | None = None
    last_fire_source: str | None = None
    consecutive_failures: int = 0
    last_attempt_at: datetime | None = None
    #: success | partial | failure of the last finalized scheduled run
    last_outcome: str | None = None
    paused: bool = False
    paused_at: datetime | None = None
    last_evaluated_at: datetime | None = None
    #: first cron occurrence after the anchor; in the past means overdue
    next_fire_at: datetime | None = None
    last_submission_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> ScheduleRow:
        return replace(self, **changes)


@dataclass(frozen=True)
class SuccessWindow:
    """When a pipeline's latest ``Success`` run started and finished (what after/freshness compare)."""

    run_id: str
    started_at: datetime
    finished_at: datetime


class ScheduleRepo:
    """Reads and writes ``schedule_state``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    # -------------------------------------------------------------- reading

    def all(self) -> dict[str, ScheduleRow]:
        """Every row, keyed by pipeline (one query: a tick over 1,000 pipelines reads them at once)."""
        return self.decode(self.stored())

    def stored(self) -> list[tuple[Any, ...]]:
        """Every row as the file holds it, undecoded: what a reader that keeps a rendering compares with
        the rows it rendered (comparing 1,000 rows costs a small fraction of decoding them)."""
        return self._store.query_tuples(_SELECT)

    def decode(self, stored: Sequence[tuple[Any, ...]]) -> dict[str, ScheduleRow]:
        """Rows of :meth:`stored` decoded, keyed by pipeline."""
        return {row.pipeline: row for row in self._store.decoded(stored, _from_row)}

    def get(self, pipeline: str) -> ScheduleRow | None:
        rows = self._store.query(f"{_SELECT} WHERE pipeline = ?", (pipeline,))
        return self._store.first(rows, _from_row)

    def latest_success(self, pipeline: str) -> SuccessWindow | None:
        """The ``Success`` run of ``pipeline`` that finished last; an index seek, no JSON decoding."""
        rows = self._store.query(
            "SELECT run_id, started_at, finished_at FROM run_history "
            "WHERE pipeline = ? AND status = 'Success' AND finished_at IS NOT NULL "
            "ORDER BY finished_at DESC LIMIT 1",
            (pipeline,),
        )
        if not rows:
            return None
        row = rows[0]
        with self._store.decoding():
            return SuccessWindow(str(row[0]), from_db(row[1]), from_db(row[2]))

    def last_evaluated(self) -> datetime | None:
        """The newest ``last_evaluated_at`` of any pipeline: when a reconciler last ticked."""
        rows = self._store.query("SELECT MAX(last_evaluated_at) FROM schedule_state")
        with self._store.decoding():
            return from_db_opt(rows[0][0]) if rows else None

    # -------------------------------------------------------------- writing

    def upsert_many(self, rows: Iterable[ScheduleRow]) -> None:
        """Write whole rows (joins the caller's transaction when there is one)."""
        values = [_to_row(r) for r in rows]
        if not values:
            return
        with self._store.transaction() as conn:
            conn.executemany(_UPSERT, values)

    def touch_evaluated(self, pipelines: Iterable[str], now: datetime) -> None:
        """Stamp ``last_evaluated_at`` on existing rows in one statement; it only ever moves forward.

        ``doctor --check scheduler`` reads it as "a reconciler evaluated this recently": a tick run with a
        ``--now`` in the past (a replay, a test of a schedule) must not make a live timer look dead.
        Timestamps are fixed-width UTC text, so comparing them as text compares the instants.
        """
        names = json.dumps(list(pipelines))
        stamp = to_db(now)
        with self._store.transaction() as conn:
            conn.execute(
                "UPDATE schedule_state SET last_evaluated_at = ? "
                "WHERE pipeline IN (SELECT value FROM json_each(?)) "
                "AND (last_evaluated_at IS NULL OR last_evaluated_at < ?)",
                (stamp, names, stamp),
            )

    def set_paused(self, pipeline: str, paused: bool, now: datetime) -> ScheduleRow:
        """Pause or resume a pipeline (creates its row when the scheduler has not seen it yet)."""
        return self.hold(pipeline, paused, now)[0]

    def hold(self, pipeline: str, paused: bool, now: datetime) -> tuple[ScheduleRow, bool]:
        """Pause or resume a pipeline; (its row after, whether the flag changed).

        Idempotent: a flag that already holds the requested value is not written again, so a repeated
        pause keeps the first ``paused_at`` (since when the pipeline is held) and a resume of a pipeline
        that is not paused writes nothing (no row is created for it)."""
        with self._store.transaction():
            row = self.get(pipeline) or ScheduleRow(pipeline=pipeline)
            if row.paused == paused:
                return row, False
            row = row.with_(paused=paused, paused_at=now if paused else None)
            self.upsert_many([row])
        return row, True


_raw_decode = json.JSONDecoder().raw_decode


def _json_object(text: str) -> dict[str, Any]:
    """``json.loads(text)`` for an ``extra`` cell, without its two whitespace regex scans (a read of
    1,000 rows spent 40% of its decoding there). Trailing data is refused as ``json.loads`` does.

    Raises:
        ValueError: not JSON, or not an object (the store's decoding guard reports a damaged store).
    """
    text = text.strip(" \t\n\r")
    value, end = _raw_decode(text)
    if end != len(text) or not isinstance(value, dict):
        raise ValueError(f"the extra column is not a JSON object: {text[:60]!r}")
    return value


def _from_row(r: Sequence[Any]) -> ScheduleRow:
    # by position, in _COLUMNS order: a sqlite3.Row and a stored() tuple read alike
    (pipeline, cron, timezone, cron_anchor, last_fire, last_fire_source, consecutive_failures,
     last_attempt_at, last_outcome, paused, paused_at, last_evaluated_at, raw_extra) = r
    extra: dict[str, Any] = _json_object(raw_extra) if raw_extra else {}
    return ScheduleRow(
        pipeline=pipeline,
        cron=cron,
        timezone=timezone,
        cron_anchor=from_db_opt(cron_anchor),
        last_fire=from_db_opt(last_fire),
        last_fire_source=last_fire_source,
        consecutive_failures=int(consecutive_failures or 0),
        last_attempt_at=from_db_opt(last_attempt_at),
        last_outcome=last_outcome,
        paused=bool(paused),
        paused_at=from_db_opt(paused_at),
        last_evaluated_at=from_db_opt(last_evaluated_at),
        next_fire_at=from_db_opt(extra.pop("next_fire_at", None)),
        last_submission_id=extra.pop("last_submission_id", None),
        extra=extra,
    )


def _to_row(row: ScheduleRow) -> tuple[Any, ...]:
    extra = dict(row.extra)
    if row.next_fire_at is not None:
        extra["next_fire_at"] = to_db(row.next_fire_at)
    if row.last_submission_id is not None:
        extra["last_submission_id"] = row.last_submission_id
    return (
        row.pipeline, row.cron, row.timezone, to_db_opt(row.cron_anchor), to_db_opt(row.last_fire),
        row.last_fire_source, row.consecutive_failures, to_db_opt(row.last_attempt_at), row.last_outcome,
        int(row.paused), to_db_opt(row.paused_at), to_db_opt(row.last_evaluated_at),
        json.dumps(extra, separators=(",", ":")) if extra else None,
    )
