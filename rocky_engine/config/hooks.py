"""``[hook]``: shell command hooks and outbound webhooks keyed by lifecycle event (CONTRACT section 9).

In TOML the keys carry the ``on_`` prefix (``[[hook.on_pipeline_error]]``,
``[hook.webhooks.on_model_error]``); in :class:`HookConfig` the dictionaries are keyed by the bare event
name (``pipeline_error``). An unknown
``on_*`` key is skipped with a warning rather than failing the whole config: a misspelled notification must
not stop the pipelines themselves.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_core import PydanticCustomError

from rocky_engine.config.base import LenientModel

#: Every lifecycle event a hook can subscribe to, without the ``on_`` prefix.
HOOK_EVENTS: tuple[str, ...] = (
    "pipeline_start",
    "discover_complete",
    "compile_complete",
    "pipeline_complete",
    "pipeline_error",
    "before_materialize",
    "after_materialize",
    "materialize_error",
    "before_model_run",
    "after_model_run",
    "model_error",
    "before_checks",
    "check_result",
    "after_checks",
    "drift_detected",
    "anomaly_detected",
    "state_synced",
    "budget_breach",
)

WebhookPreset = Literal["slack", "teams", "pagerduty", "datadog", "generic"]


class CommandHook(LenientModel):
    """A program run with the event context JSON on stdin."""

    command: str = Field(min_length=1)
    timeout_ms: int = Field(default=30000, ge=1)
    #: warn: log and go on; ignore: go on silently; abort: fail the pipeline (only on "before" events)
    on_failure: Literal["warn", "ignore", "abort"] = "warn"
    env: dict[str, str] = Field(default_factory=dict)


class WebhookHook(LenientModel):
    """An HTTP request whose body is a preset rendering of the event (or ``body_template``)."""

    url: str = Field(min_length=1)
    preset: WebhookPreset = "generic"
    method: str = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    body_template: str | None = None
    #: signs the body: ``X-Rocky-Signature: sha256=<hex HMAC>``
    secret: SecretStr | None = None
    timeout_ms: int = Field(default=10000, ge=1)
    retry_count: int = Field(default=0, ge=0)
    retry_delay_ms: int = Field(default=1000, ge=0)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        # Refused here rather than warned about when the event fires: a URL without scheme or host can never
        # deliver, and the first failure would only be seen in a log. The value is not echoed: Slack and
        # Teams webhook URLs carry their token.
        parts = urlsplit(value.strip())
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise PydanticCustomError(
                "rocky_webhook_url",
                "a webhook url must be an http:// or https:// URL with a host, e.g. "
                "https://hooks.slack.com/services/... (the value is not shown: webhook URLs carry tokens)",
            )
        return value

    @field_validator("method")
    @classmethod
    def _method(cls, value: str) -> str:
        method = value.upper()
        if method not in ("POST", "PUT", "PATCH", "GET"):
            raise PydanticCustomError(
                "rocky_method", "method must be POST, PUT, PATCH or GET (got {value})", {"value": repr(value)}
            )
        return method


class HookConfig(LenientModel):
    """All hooks of the project, keyed by bare event name."""

    commands: dict[str, list[CommandHook]] = Field(default_factory=dict)
    webhooks: dict[str, WebhookHook] = Field(default_factory=dict)

    def for_event(self, event: str) -> tuple[list[CommandHook], WebhookHook | None]:
        """The command hooks and the webhook of ``event`` (with or without the ``on_`` prefix)."""
        name = event.removeprefix("on_")
        return self.commands.get(name, []), self.webhooks.get(name)

    @property
    def empty(self) -> bool:
        return not self.commands and not self.webhooks


def unknown_event_warning(key: str, table: str) -> str:
    """The warning for an ``on_*`` key that names no event."""
    return f"unknown hook event '{key}' in [{table}] skipped; valid events: " + ", ".join(
        f"on_{e}" for e in HOOK_EVENTS
    )
