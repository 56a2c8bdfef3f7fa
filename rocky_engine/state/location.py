"""Which state file a project uses (CONTRACT section 5).

Two functions: ``resolve_state_path`` applies the location rules to known directories, and
``project_state_path`` finds those directories from a ``rocky.toml`` path. Every command that opens the
store (run, history, state, tick, doctor, serve) goes through ``project_state_path`` so they all agree.
"""

from __future__ import annotations

import re
from pathlib import Path

from rocky_engine.errors import RockyError, UsageError

_NAMESPACE = re.compile(r"^[A-Za-z0-9_]+$")
_GLOB_CHARS = frozenset("*?[")

DEFAULT_FILE = ".rocky-state.db"
NAMESPACE_DIR = ".rocky-state"
DEFAULT_MODELS_DIR = "models"


def resolve_state_path(
    *,
    config_dir: Path,
    models_dir: Path | None,
    state_path: str | None,
    namespace: str | None,
) -> Path:
    """The state file for a project.

    Rules, first match wins: ``--state-path`` (relative to the working directory);
    ``--state-namespace KEY`` gives ``<models_dir>/.rocky-state/<KEY>.db`` (``<config_dir>/...`` without a
    models dir); ``<models_dir>/.rocky-state.db`` when the models directory exists; else
    ``<config_dir>/.rocky-state.db``.

    Raises:
        UsageError: the namespace has characters other than letters, digits and ``_``.
    """
    if state_path:
        return Path.cwd() / Path(state_path).expanduser()
    if namespace is not None:
        if not _NAMESPACE.match(namespace):
            raise UsageError(f"invalid --state-namespace '{namespace}': use letters, digits and _ only")
        base = models_dir if models_dir is not None else config_dir
        return base / NAMESPACE_DIR / f"{namespace}.db"
    if models_dir is not None and models_dir.is_dir():
        return models_dir / DEFAULT_FILE
    return config_dir / DEFAULT_FILE


def project_state_path(config_path: Path, state_path: str | None, namespace: str | None) -> Path:
    """The state file of the project whose config is ``config_path``.

    A missing or invalid config is tolerated (an inspection command must still find the store): the
    config directory is then ``config_path.parent`` and the models directory ``models`` beside it.
    """
    config_dir, models_dir = _project_dirs(config_path)
    return resolve_state_path(
        config_dir=config_dir, models_dir=models_dir, state_path=state_path, namespace=namespace
    )


def _project_dirs(config_path: Path) -> tuple[Path, Path]:
    config_dir = config_path.absolute().parent
    fallback = (config_dir, config_dir / DEFAULT_MODELS_DIR)
    if not config_path.is_file():
        return fallback
    from rocky_engine.config import TransformationPipeline, load_config

    try:
        config = load_config(config_path)
    except RockyError:
        # A config that does not load is reported by the commands that need it; finding the state
        # file must not depend on it.
        return fallback
    root = Path(config.root)
    for pipeline in config.pipelines.values():
        if isinstance(pipeline, TransformationPipeline) and pipeline.models:
            return root, root / models_dir_of_glob(pipeline.models)
    return root, root / DEFAULT_MODELS_DIR


def models_dir_of_glob(glob: str) -> Path:
    """The models directory named by a ``models`` glob: its first path component.

    ``models/**`` and ``models/staging/*.sql`` are ``models``; a glob that starts with a wildcard names no
    directory and falls back to ``models``; an absolute glob keeps its leading wildcard-free components.
    """
    path = Path(glob)
    parts: list[str] = []
    for part in path.parts:
        if _GLOB_CHARS & set(part):
            break
        parts.append(part)
    if not path.is_absolute():
        parts = parts[:1]
    if not parts or (path.is_absolute() and len(parts) == 1):
        return Path(DEFAULT_MODELS_DIR)
    return Path(*parts)
