"""``RockyConfig``: one loaded rocky.toml, fully typed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from rocky_engine.config.adapters import AdapterConfig
from rocky_engine.config.connectors import ConnectorConfig
from rocky_engine.config.hooks import HookConfig
from rocky_engine.config.pipelines import PipelineConfig
from rocky_engine.config.sections import FreshnessDefaults, ScheduleDefaults, StateConfig
from rocky_engine.errors import ConfigError

T = TypeVar("T")


class RockyConfig(BaseModel):
    """A loaded project configuration; build it with :func:`rocky_engine.config.load_config`."""

    # The loader assembles it from validated parts (model_construct): its own validator is built only if
    # something validates a RockyConfig.
    model_config = ConfigDict(frozen=False, defer_build=True)

    #: absolute path of rocky.toml
    path: Path
    #: the directory of rocky.toml; relative paths in the config are taken from here
    root: Path
    #: sha256 hex of the config text after ${VAR} substitution, each secret replaced by its name (recorded
    #: with every run; config/secrets.py)
    config_hash: str
    adapters: dict[str, AdapterConfig] = Field(default_factory=dict)
    pipelines: dict[str, PipelineConfig] = Field(default_factory=dict)
    schedule: ScheduleDefaults = Field(default_factory=ScheduleDefaults)
    freshness: FreshnessDefaults = Field(default_factory=FreshnessDefaults)
    state: StateConfig = Field(default_factory=StateConfig)
    hook: HookConfig = Field(default_factory=HookConfig)
    connectors: dict[str, ConnectorConfig] = Field(default_factory=dict)
    #: non-fatal findings of loading (unknown hook events, unknown top-level tables)
    warnings: list[str] = Field(default_factory=list)

    def pipeline(self, name: str) -> PipelineConfig:
        """The pipeline called ``name``.

        Raises:
            ConfigError: no such pipeline; the message lists the available names.
        """
        return self._lookup(
            self.pipelines, "pipeline", name, "pass one of those names or add a [pipeline.<name>] table"
        )

    def adapter(self, name: str) -> AdapterConfig:
        """The adapter called ``name``.

        Raises:
            ConfigError: no such adapter; the message lists the available names.
        """
        return self._lookup(
            self.adapters, "adapter", name, "use one of those names or add an [adapter.<name>] table"
        )

    def connector(self, name: str) -> ConnectorConfig:
        """The child connector called ``name``.

        Raises:
            ConfigError: no such connector; the message lists the available names.
        """
        return self._lookup(
            self.connectors, "connector", name, "use one of those names or add a [connector.<name>] table"
        )

    def pipeline_timezone(self, name: str) -> str:
        """The timezone a pipeline's schedule uses: its own, else ``[schedule].timezone``."""
        pipeline = self.pipeline(name)
        if pipeline.schedule is not None and pipeline.schedule.timezone:
            return pipeline.schedule.timezone
        return self.schedule.timezone

    def _lookup(self, items: Mapping[str, T], kind: str, name: str, hint: str) -> T:
        """``items[name]``, or the ConfigError that lists the defined names of ``kind``."""
        try:
            return items[name]
        except KeyError:
            names = ", ".join(sorted(items)) if items else "(none defined)"
            raise ConfigError(
                f"unknown {kind} '{name}'; available {kind}s: {names}", file=self.path, hint=hint
            ) from None
