"""Lifecycle hooks (CONTRACT section 9): command hooks and outbound webhooks fired by every run path.

``build_event_sink`` gives a run its sink (an ``hooks.sink.EventSink``); runners call
``ctx.events.fire(event, ...)`` and ``run.lifecycle`` fires the pipeline events. Importing this package
imports nothing else: a run without hooks uses ``hooks.sink`` only, and the dispatcher (with
``subprocess``) loads when one of the names below is first used; webhooks load httpx only when one fires.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocky_engine.hooks.dispatcher import HookDispatcher, HookResult, build_event_sink
    from rocky_engine.hooks.event import ABORTABLE_EVENTS, HookEvent

__all__ = ["ABORTABLE_EVENTS", "HookDispatcher", "HookEvent", "HookResult", "build_event_sink"]

_HOME = {
    "HookDispatcher": "dispatcher", "HookResult": "dispatcher", "build_event_sink": "dispatcher",
    "ABORTABLE_EVENTS": "event", "HookEvent": "event",
}


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
