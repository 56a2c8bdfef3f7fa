"""A loaded project: config + paths, the object every command starts from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    #: the state file once settled (see :meth:`state_path`); a process never moves it twice
    _state_file: Path | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def root(self) -> Path:
        return self.config.root

    @property
    def dot_rocky(self) -> Path:
        """``.rocky/`` next to rocky.toml: tick lock, incidents, spool."""
        return self.root / ".rocky"

    def state_path(self, *, reading: bool = False) -> Path:
        """The state file (``state.location``: never dependent on the pipelines), absolute.

        The first call of the process settles it: a store found where an older engine put it is moved to
        the location rule's file (``state.relocate``). The answer is kept, so the process keeps one file
        even if ``models/`` appears or rocky.toml changes while it runs.

        Args:
            reading: the caller only reads; when the old store's writer is busy it is read where it is
                (and that answer is not kept) instead of failing on the lock.

        Raises:
            StateLockedError: an old store waits to be moved and another process writes it (writers only).
            StateError: the old store cannot be moved (the message says what to run).
            UsageError: an invalid ``--state-namespace``.
        """
        if self._state_file is not None:
            return self._state_file
        path = locate_state_file(
            self.root, self.config, state_path=self.state_path_flag, namespace=self.state_namespace,
            reading=reading,
        )
        if not reading or path == self._rule_file():
            self._state_file = path
        return path

    def _rule_file(self) -> Path:
        from rocky_engine.state.location import state_file

        return state_file(self.root, state_path=self.state_path_flag, namespace=self.state_namespace)

    def load_models(self, pipeline_name: str, env: Mapping[str, str] | None = None) -> ModelSet:
        from rocky_engine.models import load_models

        pipeline = self.config.pipeline(pipeline_name)
        return load_models(pipeline.models, self.root, env)  # type: ignore[union-attr]


def locate_state_file(
    config_dir: Path, config: RockyConfig | None, *, state_path: str | None, namespace: str | None,
    reading: bool,
) -> Path:
    """The state file of the project in ``config_dir``, moving a store found at an older location.

    ``config`` (None when rocky.toml does not load) names the models directories where an older engine
    may have put the store; without it only the config directory is looked at.
    """
    from rocky_engine.state.location import legacy_state_files, state_file

    path = state_file(config_dir, state_path=state_path, namespace=namespace)
    if state_path:
        return path  # an explicit file is the user's choice: nothing is looked for or moved
    models_dirs = _legacy_models_dirs(config_dir, config) if config is not None else []
    legacy = legacy_state_files(config_dir, models_dirs, namespace, path)
    if not legacy:
        return path
    from rocky_engine.state.relocate import settle_state_file

    return settle_state_file(path, legacy, project_dir=config_dir, reading=reading)


def _legacy_models_dirs(config_dir: Path, config: RockyConfig) -> list[Path]:
    """The models directory of every transformation pipeline: an older engine kept the store in the first
    one's (whichever came first when the store was created)."""
    from rocky_engine.config import TransformationPipeline

    pipelines = config.pipelines.values()
    globs = [p.models for p in pipelines if isinstance(p, TransformationPipeline) and p.models]
    if not globs:
        return []
    from rocky_engine.models.loader import models_base_dir

    return [models_base_dir(glob, config_dir) for glob in globs]


def project_state_file(
    config_path: Path, *, state_path: str | None, namespace: str | None, reading: bool = True
) -> Path:
    """The state file of the project whose rocky.toml is ``config_path``, for a command that must find the
    store even when rocky.toml is missing or does not load (``history``, ``state``, ``doctor``)."""
    return locate_state_file(
        config_path.absolute().parent, config_if_it_loads(config_path), state_path=state_path,
        namespace=namespace, reading=reading,
    )


def config_if_it_loads(config_path: Path) -> RockyConfig | None:
    """rocky.toml when it is there and loads, else None (the commands that need it report why; finding
    the store of a project whose config is broken must still work)."""
    from rocky_engine.config import load_config
    from rocky_engine.errors import RockyError

    if not config_path.is_file():
        return None
    try:
        return load_config(config_path)
    except RockyError:
        return None


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
