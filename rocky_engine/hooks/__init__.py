"""Lifecycle hooks (CONTRACT section 9): command hooks and outbound webhooks fired by every run path.

``build_event_sink`` gives a run its sink; runners call ``ctx.events.fire(event, ...)``. Importing this
package does not import httpx: webhooks load it only when one fires.
"""

from __future__ import annotations

from rocky_engine.hooks.dispatcher import HookDispatcher, HookResult, build_event_sink
from rocky_engine.hooks.event import ABORTABLE_EVENTS, HookEvent

__all__ = ["ABORTABLE_EVENTS", "HookDispatcher", "HookEvent", "HookResult", "build_event_sink"]
