"""Webhook bodies: the service-shaped presets and ``body_template`` rendering.

Presets (``preset = ...`` under ``[hook.webhooks.on_<event>]``):

- ``slack``: an incoming-webhook message, ``text`` plus Block Kit ``blocks`` (header, fields, error).
- ``teams``: a Teams workflow message carrying one Adaptive Card (``attachments[0].content``).
- ``pagerduty``: an Events API v2 event; the routing key comes from the ``X-Routing-Key`` (or
  ``routing_key``) entry of ``headers``, which is moved into the body and not sent as a header. Error
  events ``trigger``; a successful ``pipeline_complete`` ``resolve``s the pipeline's incident (same
  ``dedup_key``), so a recovered pipeline closes its own page.
- ``datadog``: a Datadog event (``title``, ``text``, ``alert_type``, ``tags``); send the API key with
  ``headers = { DD-API-KEY = "${DD_API_KEY}" }``.
- ``generic``: the raw event context.

``body_template`` replaces the preset: ``{{ name }}`` placeholders take ``event``, ``run_id``,
``pipeline``, ``timestamp``, ``model``, ``table``, ``error``, ``duration_ms``, ``summary``, ``severity``,
``metadata.<key>`` and ``context`` (the whole context as JSON). In a template that is JSON (once every
placeholder is filled) values are JSON-escaped, so an error message with quotes keeps the body valid.
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any

from rocky_engine.hooks.event import HookEvent

#: headers that carry the PagerDuty routing key into the body (compared case-insensitively)
ROUTING_KEY_HEADERS = frozenset({"x-routing-key", "routing_key", "routing-key"})

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")

_SLACK_EMOJI = {"error": ":red_circle:", "warning": ":large_orange_circle:", "success": ":white_check_mark:",
                "info": ":information_source:"}
_TEAMS_COLOR = {"error": "Attention", "warning": "Warning", "success": "Good", "info": "Default"}
_PD_SEVERITY = {"error": "error", "warning": "warning", "success": "info", "info": "info"}
_DD_ALERT = {"error": "error", "warning": "warning", "success": "success", "info": "info"}


class PresetError(Exception):
    """A webhook cannot be rendered as configured (e.g. pagerduty without a routing key)."""


def facts(event: HookEvent) -> list[tuple[str, str]]:
    """The (label, value) pairs every preset shows."""
    rows = [("Pipeline", event.pipeline), ("Event", event.event), ("Run", event.run_id)]
    if event.model:
        rows.append(("Model", event.model))
    if event.table:
        rows.append(("Table", event.table))
    status = event.metadata.get("status")
    if status:
        rows.append(("Status", str(status)))
    if event.duration_ms is not None:
        rows.append(("Duration", f"{event.duration_ms / 1000:.1f} s"))
    return rows


def render_body(
    preset: str, event: HookEvent, template: str | None, headers: dict[str, str]
) -> tuple[bytes, str]:
    """The request body and its content type.

    Raises:
        PresetError: the preset needs something the configuration does not give.
    """
    if template is not None:
        text = render_template(template, event)
        return text.encode("utf-8"), _content_type(text)
    body: dict[str, Any]
    if preset == "slack":
        body = slack_body(event)
    elif preset == "teams":
        body = teams_body(event)
    elif preset == "pagerduty":
        body = pagerduty_body(event, routing_key(headers))
    elif preset == "datadog":
        body = datadog_body(event)
    else:
        body = event.payload()
    return json.dumps(body, separators=(",", ":"), default=str).encode("utf-8"), "application/json"


def routing_key(headers: dict[str, str]) -> str:
    for name, value in headers.items():
        if name.lower() in ROUTING_KEY_HEADERS and value:
            return value
    raise PresetError(
        "the pagerduty preset needs a routing key: add headers = { X-Routing-Key = \"${PD_ROUTING_KEY}\" } "
        "or write the whole event in body_template"
    )


def slack_body(event: HookEvent) -> dict[str, Any]:
    """An incoming-webhook message with Block Kit blocks (``text`` is the notification fallback)."""
    title = f"{_SLACK_EMOJI[event.severity]} {event.summary()}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": event.summary()[:150], "emoji": True}},
        {
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": f"*{label}*\n{_slack_escape(value)}"}
                       for label, value in facts(event)[:10]],
        },
    ]
    if event.error:
        error = _slack_escape(event.error)[:2900]
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{error}```"}})
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"rocky · {event.timestamp}"}]}
    )
    return {"text": title, "blocks": blocks}


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def teams_body(event: HookEvent) -> dict[str, Any]:
    """A Teams workflow (Power Automate) message with one Adaptive Card."""
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": event.summary(),
            "weight": "Bolder",
            "size": "Medium",
            "wrap": True,
            "color": _TEAMS_COLOR[event.severity],
        },
        {"type": "FactSet", "facts": [{"title": label, "value": value} for label, value in facts(event)]},
    ]
    if event.error:
        body.append({"type": "TextBlock", "text": event.error, "wrap": True, "fontType": "Monospace"})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }
    return {
        "type": "message",
        "summary": event.summary(),
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}
        ],
    }


def pagerduty_body(event: HookEvent, key: str) -> dict[str, Any]:
    """An Events API v2 ``trigger`` (or ``resolve`` for a successful ``pipeline_complete``)."""
    dedup = f"rocky/{event.pipeline}" + (f"/{event.model}" if event.model else "")
    if event.event == "pipeline_complete" and event.severity == "success":
        return {"routing_key": key, "event_action": "resolve", "dedup_key": dedup}
    details = event.payload()
    return {
        "routing_key": key,
        "event_action": "trigger",
        "dedup_key": dedup,
        "payload": {
            "summary": (event.summary() + (f": {event.error}" if event.error else ""))[:1024],
            "source": socket.gethostname(),
            "severity": _PD_SEVERITY[event.severity],
            "timestamp": event.timestamp,
            "component": event.pipeline,
            "group": "rocky",
            "class": event.event,
            "custom_details": details,
        },
    }


def datadog_body(event: HookEvent) -> dict[str, Any]:
    """A Datadog event (``POST /api/v1/events``)."""
    lines = [f"{label}: {value}" for label, value in facts(event)]
    if event.error:
        lines.append(f"Error: {event.error}")
    tags = [f"pipeline:{event.pipeline}", f"event:{event.event}", "source:rocky"]
    if event.model:
        tags.append(f"model:{event.model}")
    return {
        "title": event.summary()[:100],
        "text": "\n".join(lines)[:4000],
        "alert_type": _DD_ALERT[event.severity],
        "source_type_name": "rocky",
        "aggregation_key": f"rocky/{event.pipeline}",
        "tags": tags,
    }


def render_template(template: str, event: HookEvent) -> str:
    """Fill ``{{ placeholders }}``; unknown names render empty."""
    as_json = _is_json_template(template)
    values = _template_values(event)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "context":
            return event.to_json()
        if name.startswith("metadata."):
            value: Any = event.metadata.get(name.split(".", 1)[1])
        else:
            value = values.get(name)
        text = "" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)
        # json.dumps of a str gives a quoted, escaped literal; the template supplies its own quotes.
        return json.dumps(text)[1:-1] if as_json else text

    return _PLACEHOLDER.sub(replace, template)


def _is_json_template(template: str) -> bool:
    """A template that is JSON once every placeholder is a value (``"{{ error }}"`` or ``{{ context }}``)."""
    try:
        json.loads(_PLACEHOLDER.sub("0", template))
    except ValueError:
        return False
    return True


def _template_values(event: HookEvent) -> dict[str, Any]:
    return {
        "event": event.event,
        "run_id": event.run_id,
        "pipeline": event.pipeline,
        "timestamp": event.timestamp,
        "model": event.model,
        "table": event.table,
        "error": event.error,
        "duration_ms": event.duration_ms,
        "summary": event.summary(),
        "severity": event.severity,
    }


def _content_type(text: str) -> str:
    try:
        json.loads(text)
    except ValueError:
        return "text/plain; charset=utf-8"
    return "application/json"
