"""A loaded project: config + paths, the object every command starts from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig
    from rocky_engine.models import ModelSet


@dataclass
class Project:
    """``rocky.toml`` loaded, with the locations derived from it."""

    config: RockyConfig
    state_path_flag: str | None = None
    state_namespace: str | None = None

    @property
    def root(self) -> Path:
        return self.config.root

    @property
    def dot_rocky(self) -> Path:
        """``.rocky/`` next to rocky.toml: tick lock, incidents, spool."""
        return self.root / ".rocky"

    def models_dir(self) -> Path:
        """The models directory of the first transformation pipeline (default ``<root>/models``)."""
        for pipeline in self.config.pipelines.values():
            if pipeline.type == "transformation":
                # Imported here: a replication-only project never loads the models package.
                from rocky_engine.models.loader import models_base_dir

                return models_base_dir(pipeline.models, self.root)
        return self.root / "models"

    def state_path(self) -> Path:
        from rocky_engine.state.location import resolve_state_path

        models = self.models_dir()
        return resolve_state_path(
            config_dir=self.root,
            models_dir=models if models.is_dir() else None,
            state_path=self.state_path_flag,
            namespace=self.state_namespace,
        ).absolute()

    def load_models(self, pipeline_name: str, env: Mapping[str, str] | None = None) -> ModelSet:
        from rocky_engine.models import load_models

        pipeline = self.config.pipeline(pipeline_name)
        return load_models(pipeline.models, self.root, env)  # type: ignore[union-attr]


def load_project(
    config_path: str | Path,
    *,
    state_path: str | None = None,
    state_namespace: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Project:
    """Load ``rocky.toml``; raises ConfigError with file, key and fix."""
    from rocky_engine.config import load_config

    config = load_config(Path(config_path), env=os.environ if env is None else env)
    return Project(config=config, state_path_flag=state_path, state_namespace=state_namespace)
