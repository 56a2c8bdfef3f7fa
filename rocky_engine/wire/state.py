"""The ``rocky state`` documents: watermarks (the default action) and ``state schedule pause|resume``.

``rocky state schedule spool`` prints :class:`rocky_engine.wire.spool.SpoolResult`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published


class WatermarkRow(WireModel):
    """One watermark: ``key`` is the table's full name (``table`` to the published client), ``value`` the
    stored text, ``last_value`` the same as the published client reads it (a timestamp in UTC with ``Z``)."""

    key: str = published("table")
    value: str
    last_value: str
    updated_at: str


class WatermarksResult(WireModel):
    """``{version, command: "state", schema_version_supported, schema_version_on_disk?, watermarks: [{key,
    table, value, last_value, updated_at}]}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "schema_version_supported", "watermarks"}
    )

    version: str = __version__
    command: Literal["state"] = "state"
    #: the state-store schema version this engine writes, and the one the store on disk is at
    schema_version_supported: int = 0
    schema_version_on_disk: int | None = None
    watermarks: list[WatermarkRow] = Field(default_factory=list)


class ScheduleHoldResult(WireModel):
    """``rocky state schedule pause|resume``: ``{version, command: "state", action: "pause"|"resume",
    pipeline, paused, changed, state_path, paused_at?}`` (the published ``ScheduleHoldOutput``).

    ``changed`` is false when the hold already had the requested value (a repeated pause keeps the first
    ``paused_at``); ``state_path`` is the store file written, the one a scheduler must read for the hold
    to apply to it."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command"})

    version: str = __version__
    command: Literal["state"] = "state"
    action: Literal["pause", "resume"]
    pipeline: str
    paused: bool
    changed: bool
    state_path: str
    #: since when the pipeline is held (a paused pipeline only)
    paused_at: str | None = None
