"""Replication watermarks: the high-water mark of each target table, keyed ``catalog.schema.table``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rocky_engine.state._time import from_db, now_utc, to_db

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore


@dataclass(frozen=True)
class Watermark:
    """One stored watermark."""

    key: str
    value: str
    updated_at: datetime


class WatermarkRepo:
    """Reads and writes the ``watermarks`` table; reached as ``store.watermarks``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def get(self, key: str) -> str | None:
        rows = self._store.query("SELECT value FROM watermarks WHERE key = ?", (key,))
        return str(rows[0]["value"]) if rows else None

    def set_many(self, values: Mapping[str, str], *, now: datetime | None = None) -> None:
        """Upsert every watermark in ``values`` in one transaction (a run's watermarks move together)."""
        if not values:
            return
        stamp = to_db(now or now_utc())
        with self._store.transaction() as conn:
            conn.executemany(
                "INSERT INTO watermarks (key, value, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                [(key, value, stamp) for key, value in values.items()],
            )

    def set(self, key: str, value: str, *, now: datetime | None = None) -> None:
        self.set_many({key: value}, now=now)

    def all(self) -> list[Watermark]:
        """Every watermark, ordered by key."""
        rows = self._store.query("SELECT key, value, updated_at FROM watermarks ORDER BY key")
        with self._store.decoding():
            return [Watermark(str(r["key"]), str(r["value"]), from_db(r["updated_at"])) for r in rows]

    def delete(self, key: str) -> bool:
        """Forget one watermark (the next incremental copy of that table starts from scratch)."""
        with self._store.transaction() as conn:
            return conn.execute("DELETE FROM watermarks WHERE key = ?", (key,)).rowcount > 0
