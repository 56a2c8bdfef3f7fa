"""``rocky state``: what the state store holds, for operators (CONTRACT section 8)."""

from __future__ import annotations

from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.state._time import rfc3339
from rocky_engine.state.schema import SCHEMA_VERSION
from rocky_engine.state.store import StateStore
from rocky_engine.wire.base import timestamp_text
from rocky_engine.wire.state import WatermarkRow, WatermarksResult


class WatermarksOutput(WatermarksResult, Result):
    """``rocky state``: the watermarks, rendered."""

    def render_table(self) -> str:
        if not self.watermarks:
            return "no watermarks recorded yet\n"
        return render_rows(None, *self._grid())

    def render_md(self) -> str:
        if not self.watermarks:
            return "_no watermarks recorded yet_\n"
        return md_table(*self._grid())

    def _grid(self) -> tuple[list[str], list[list[str]]]:
        return ["TABLE", "WATERMARK", "UPDATED"], [[w.key, w.value, w.updated_at] for w in self.watermarks]


def build_watermarks(store: StateStore) -> WatermarksOutput:
    rows = [
        WatermarkRow(key=w.key, value=w.value, last_value=timestamp_text(w.value),
                     updated_at=rfc3339(w.updated_at))
        for w in store.watermarks.all()
    ]
    return WatermarksOutput(watermarks=rows, schema_version_supported=SCHEMA_VERSION,
                            # a reader of a missing file is an empty in-memory store: nothing is on disk
                            schema_version_on_disk=store.schema_version if store.path.exists() else None)
