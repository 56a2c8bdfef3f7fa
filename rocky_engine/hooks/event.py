"""The event context every hook receives (CONTRACT section 9).

Command hooks read it as JSON on stdin; webhook presets render it into a service-shaped body; the
``generic`` preset posts it as it is. Optional fields that are unknown are omitted, ``metadata`` is always
present (an empty object when the event carries none).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rocky_engine.wire.hooks import HookContext

#: Events that happen before work is done: a hook with ``on_failure = "abort"`` can stop the run there.
ABORTABLE_EVENTS: frozenset[str] = frozenset(
    {
        "pipeline_start",
        "discover_complete",
        "compile_complete",
        "before_materialize",
        "before_model_run",
        "before_checks",
    }
)

#: Events after the work where an ``abort`` hook fails the run (it cannot stop work that is done, but an
#: explicit abort is never downgraded to a warning): the run becomes a ``Failure`` naming the hook.
FAILING_EVENTS: frozenset[str] = frozenset({"pipeline_complete"})

#: Events that report a failure (presets colour them red and PagerDuty triggers on them).
ERROR_EVENTS: frozenset[str] = frozenset(
    {"pipeline_error", "materialize_error", "model_error", "budget_breach"}
)

#: Events that report something worth a look without being a failure.
WARNING_EVENTS: frozenset[str] = frozenset({"drift_detected", "anomaly_detected"})


def rfc3339_now() -> str:
    """Now in UTC, RFC 3339 with millisecond precision and ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class HookEvent(HookContext):
    """One fired event with its context (the document is ``rocky_engine.wire.hooks.HookContext``)."""

    def payload(self) -> dict[str, Any]:
        """The context object: ``{event, run_id, pipeline, timestamp, model?, table?, error?,
        duration_ms?, metadata}``."""
        return self.wire()

    def to_json(self) -> str:
        return json.dumps(self.payload(), separators=(",", ":"), default=str)

    @property
    def severity(self) -> str:
        """``error``, ``warning``, ``success`` or ``info``: how a preset should present the event."""
        status = str(self.metadata.get("status", ""))
        if self.event in ERROR_EVENTS or status == "Failure":
            return "error"
        if self.event in WARNING_EVENTS or status == "PartialFailure":
            return "warning"
        if self.event == "check_result" and self.metadata.get("passed") is False:
            return "warning"
        if self.event == "pipeline_complete" and status == "Success":
            return "success"
        return "info"

    def summary(self) -> str:
        """One line for a notification title: what happened, to what."""
        subject = f"pipeline {self.pipeline}"
        if self.model:
            subject += f", model {self.model}"
        elif self.table:
            subject += f", table {self.table}"
        status = self.metadata.get("status")
        tail = f" ({status})" if status else ""
        return f"Rocky {self.event.replace('_', ' ')}: {subject}{tail}"
