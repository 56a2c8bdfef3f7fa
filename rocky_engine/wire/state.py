"""The ``rocky state`` documents: watermarks (the default action) and ``state schedule pause|resume``.

``rocky state schedule spool`` prints :class:`rocky_engine.wire.spool.SpoolResult`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel


class WatermarkRow(WireModel):
    key: str
    value: str
    updated_at: str


class WatermarksResult(WireModel):
    """``{version, command: "state", watermarks: [{key, value, updated_at}]}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "watermarks"})

    version: str = __version__
    command: Literal["state"] = "state"
    watermarks: list[WatermarkRow] = Field(default_factory=list)


class PauseResult(WireModel):
    """``{version, command: "state", action: "pause"|"resume", pipeline, paused, paused_at?}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command"})

    version: str = __version__
    command: Literal["state"] = "state"
    action: Literal["pause", "resume"]
    pipeline: str
    paused: bool
    paused_at: str | None = None
