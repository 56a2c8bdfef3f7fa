"""Check results over time: the audit of what each run checked, and the row-count anomaly baseline.

A run records its check results in one transaction. The ``row_count`` check's ``value`` is the table's
row count after the run; the newest of those are the baseline the next run's count is compared with
(``anomaly_threshold_pct``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rocky_engine.state._time import from_db, now_utc, to_db

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

ROW_COUNT = "row_count"


@dataclass(frozen=True)
class CheckRecord:
    """One check result of one table in one run."""

    run_id: str
    table_key: str
    check_name: str
    passed: bool
    value: float | int | None = None
    severity: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    recorded_at: datetime | None = None


class CheckHistoryRepo:
    """Reads and writes ``check_history``; reached as ``store.checks``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def record_many(self, records: Iterable[CheckRecord], *, now: datetime | None = None) -> None:
        """Record a run's check results in one transaction."""
        stamp = now or now_utc()
        rows = [
            (
                r.run_id, r.table_key, r.check_name, int(r.passed), r.value, r.severity,
                json.dumps(r.detail, separators=(",", ":"), default=str) if r.detail else None,
                to_db(r.recorded_at or stamp),
            )
            for r in records
        ]
        if not rows:
            return
        with self._store.transaction() as conn:
            conn.executemany(
                "INSERT INTO check_history (run_id, table_key, check_name, passed, value, severity, detail, "
                "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def row_count_baseline(self, table_key: str, n: int = 10) -> list[int]:
        """The newest ``n`` recorded row counts of ``table_key``, newest first (empty: no baseline yet)."""
        rows = self._store.query(
            "SELECT value FROM check_history WHERE table_key = ? AND check_name = ? AND value IS NOT NULL "
            "ORDER BY recorded_at DESC, id DESC LIMIT ?",
            (table_key, ROW_COUNT, n),
        )
        with self._store.decoding():
            return [int(r["value"]) for r in rows]

    def for_run(self, run_id: str) -> list[CheckRecord]:
        """Every check recorded by ``run_id``, in recording order."""
        rows = self._store.query(
            "SELECT run_id, table_key, check_name, passed, value, severity, detail, recorded_at "
            "FROM check_history WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        with self._store.decoding():
            return [
                CheckRecord(
                    run_id=r["run_id"], table_key=r["table_key"], check_name=r["check_name"],
                    passed=bool(r["passed"]), value=r["value"], severity=r["severity"],
                    detail=json.loads(r["detail"]) if r["detail"] else {},
                    recorded_at=from_db(r["recorded_at"]),
                )
                for r in rows
            ]
