"""``rocky state``: what the state store holds, for operators (CONTRACT section 8)."""

from __future__ import annotations

from rocky_engine import __version__
from rocky_engine.output import Result, WireModel, md_table, render_rows
from rocky_engine.state._time import rfc3339
from rocky_engine.state.store import StateStore


class WatermarkRow(WireModel):
    key: str
    value: str
    updated_at: str


class WatermarksResult(Result):
    """``{version, command: "state", watermarks: [{key, value, updated_at}]}``."""

    version: str
    command: str = "state"
    watermarks: list[WatermarkRow]

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


def build_watermarks(store: StateStore) -> WatermarksResult:
    rows = [
        WatermarkRow(key=w.key, value=w.value, updated_at=rfc3339(w.updated_at))
        for w in store.watermarks.all()
    ]
    return WatermarksResult(version=__version__, watermarks=rows)
