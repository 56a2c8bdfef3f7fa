"""The ``rocky validate`` document (CONTRACT section 8)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel


class ValidationMessage(WireModel):
    """One finding of ``rocky validate``."""

    severity: Literal["error", "warning"]
    #: ``V001``...: stable, documented in docs/reference-config.md
    code: str
    message: str
    #: the dotted config key the finding is about (``pipeline.raw.schedule.cron``)
    field: str | None = None


class PipelineSummary(WireModel):
    name: str
    type: str


class ValidateResult(WireModel):
    """``{version, command: "validate", valid, messages[], adapters[], pipelines[], models}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "valid", "messages", "adapters", "pipelines", "models"}
    )

    version: str = __version__
    command: Literal["validate"] = "validate"
    valid: bool
    messages: list[ValidationMessage] = Field(default_factory=list)
    adapters: list[str] = Field(default_factory=list)
    pipelines: list[PipelineSummary] = Field(default_factory=list)
    models: int = 0
