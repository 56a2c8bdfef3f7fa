"""Hook documents: the event context a command hook reads on stdin (CONTRACT section 9), and the
``rocky hooks list`` / ``rocky hooks test`` results."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published


class HookContext(WireModel):
    """``{event, run_id, pipeline, timestamp, model?, table?, error?, duration_ms?, metadata}``: one fired
    event (``metadata`` is always present, ``{}`` when the event carries none)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"metadata"})

    #: the event name without ``on_`` (``pipeline_start``)
    event: str
    run_id: str
    pipeline: str
    #: RFC 3339 UTC with milliseconds and ``Z``
    timestamp: str
    model: str | None = None
    table: str | None = None
    error: str | None = None
    duration_ms: int | None = None
    #: event-specific facts (``status``, ``checks``, ``failed_tables`` ...), already JSON-ready
    metadata: dict[str, Any] = Field(default_factory=dict)


class ListedHook(WireModel):
    #: ``on_<event>``
    event: str
    index: int
    command: str
    timeout_ms: int
    on_failure: str
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"env"})

    #: the names of the hook's ``env`` table, never the values (usually secrets); ``env_keys`` to the
    #: published client
    env: list[str] = published("env_keys", default_factory=list)


class HooksListResult(WireModel):
    """``rocky hooks list``: command hooks only, ``total`` of them."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "total", "hooks"})

    version: str = __version__
    command: Literal["hooks list"] = "hooks list"
    total: int = 0
    hooks: list[ListedHook] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class TestedHook(WireModel):
    """What one hook did with the synthetic event."""

    #: ``command`` or ``webhook``
    kind: str
    hook: str
    #: program name (command) or scheme://host (webhook): never the full command line or URL
    target: str
    ok: bool
    duration_ms: int
    exit_code: int | None = None
    status_code: int | None = None
    attempts: int | None = None
    error: str | None = None
    on_failure: str | None = None


class HooksTestResult(WireModel):
    """``rocky hooks test on_<event>``: ``status`` is what the run would do next, ``continue``, or ``abort``
    when a failed hook has ``on_failure = "abort"``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "status", "results"})

    version: str = __version__
    command: Literal["hooks test"] = "hooks test"
    status: Literal["continue", "abort"] = "continue"
    #: one line naming the failed hooks (absent when every hook succeeded)
    message: str | None = None
    event: str
    run_id: str
    pipeline: str
    results: list[TestedHook] = Field(default_factory=list)
