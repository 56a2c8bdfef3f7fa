"""The ``rocky validate`` document (CONTRACT section 8), in the published shape: ``adapters[]`` and
``models`` are objects (``{name, adapter_type, ok}``, ``{count, found, dag_valid}``), each pipeline says its
``pipeline_type`` (written as ``type`` too), whether it is ``ok``, and its target templates and strategy."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published


class ValidationMessage(WireModel):
    """One finding of ``rocky validate``."""

    severity: Literal["error", "warning"]
    #: ``V001``...: stable, documented in docs/reference-config.md
    code: str
    message: str
    #: the dotted config key the finding is about (``pipeline.raw.schedule.cron``)
    field: str | None = None


class AdapterSummary(WireModel):
    name: str
    adapter_type: str
    #: no error finding is about this adapter
    ok: bool = True


class PipelineSummary(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"catalog_template", "schema_template", "strategy"})

    name: str
    type: str = published("pipeline_type")
    #: no error finding is about this pipeline
    ok: bool = True
    #: where it writes: a replication pipeline's templates, the literal target catalog / schema of the
    #: others (``""`` where the pipeline type has none)
    catalog_template: str = ""
    schema_template: str = ""
    #: the replication strategy, or what the pipeline does (``transformation``, ``snapshot``, ...)
    strategy: str = ""


class ModelsSummary(WireModel):
    """The models of every transformation pipeline."""

    count: int = 0
    #: a models directory a transformation pipeline names exists
    found: bool = False
    #: no dependency cycle and no unknown dependency
    dag_valid: bool = True


class ValidateResult(WireModel):
    """``{version, command: "validate", valid, messages[], adapters[], pipelines[], models}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "valid", "messages", "adapters", "pipelines", "models"}
    )

    version: str = __version__
    command: Literal["validate"] = "validate"
    valid: bool
    messages: list[ValidationMessage] = Field(default_factory=list)
    adapters: list[AdapterSummary] = Field(default_factory=list)
    pipelines: list[PipelineSummary] = Field(default_factory=list)
    models: ModelsSummary = Field(default_factory=ModelsSummary)
