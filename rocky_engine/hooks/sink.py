"""Where a run fires its lifecycle events (CONTRACT section 9): the ``EventSink`` protocol and the sink of a
run without hooks.

It lives with the hooks, below ``run/``: the runners fire into it, the hook dispatcher implements it, and
neither has to import the other's layer.
"""

from __future__ import annotations

from typing import Any, Protocol


class EventSink(Protocol):
    """Receives lifecycle events; :class:`~rocky_engine.hooks.dispatcher.HookDispatcher` implements it."""

    def fire(
        self,
        event: str,
        *,
        model: str | None = None,
        table: str | None = None,
        error: str | None = None,
        duration_ms: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None: ...


class NullEventSink:
    """Used when no hooks are configured: every event is dropped."""

    def fire(self, event: str, **context: Any) -> None:
        return None
