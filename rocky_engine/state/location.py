"""Which state file a project uses (CONTRACT section 5): one rule for every command, the server and the
scheduler.

=================================  ==========================================================
``--state-path P``                 ``P`` (relative to the working directory)
``<config dir>/models/`` exists    ``<config dir>/models/.rocky-state.db``
otherwise                          ``<config dir>/.rocky-state.db``
=================================  ==========================================================

``--state-namespace KEY`` keeps ``.rocky-state/<KEY>.db`` under the same base. The answer depends on the
config directory and the flags only, never on the pipelines of rocky.toml, their order or their globs.

Older engines kept the store in the models directory of the *first* transformation pipeline (for
``models = "models/staging/**"``: ``models/staging/.rocky-state.db``), or in the config directory when that
directory did not exist. :func:`legacy_state_files` lists the stores found at those places;
``state.relocate`` moves one to where this rule says (``Project.state_path`` calls both).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from rocky_engine.errors import UsageError

_NAMESPACE = re.compile(r"^[A-Za-z0-9_]+$")

DEFAULT_FILE = ".rocky-state.db"
#: upstream Rocky's store (redb, another engine's file format): detected and named, never read
UPSTREAM_FILE = ".rocky-state.redb"
NAMESPACE_DIR = ".rocky-state"
MODELS_DIR = "models"


def check_namespace(namespace: str | None) -> None:
    """Raises UsageError when ``namespace`` has characters other than letters, digits and ``_``."""
    if namespace is not None and not _NAMESPACE.match(namespace):
        raise UsageError(f"invalid --state-namespace '{namespace}': use letters, digits and _ only")


def state_base(config_dir: Path) -> Path:
    """The store's directory: ``<config dir>/models`` when that is a directory, else the config dir."""
    models = config_dir / MODELS_DIR
    return models if models.is_dir() else config_dir


def store_file_in(base: Path, namespace: str | None) -> Path:
    """The store of ``namespace`` (None: the default store) under ``base``."""
    return base / DEFAULT_FILE if namespace is None else base / NAMESPACE_DIR / f"{namespace}.db"


def state_file(config_dir: Path, *, state_path: str | None, namespace: str | None) -> Path:
    """The state file of the project whose rocky.toml is in ``config_dir`` (the rule above), absolute.

    Raises:
        UsageError: the namespace is not ``^[A-Za-z0-9_]+$`` (checked with ``--state-path`` too: the
            namespace still names the project's remote state).
    """
    check_namespace(namespace)
    if state_path:
        return Path.cwd() / Path(state_path).expanduser()
    return store_file_in(state_base(Path(os.path.normpath(config_dir.absolute()))), namespace)


def legacy_state_files(
    config_dir: Path, models_dirs: Iterable[Path], namespace: str | None, current: Path
) -> list[Path]:
    """The stores found where an older engine put this project's store, other than ``current``.

    Args:
        config_dir: the directory of rocky.toml.
        models_dirs: the models directory of every transformation pipeline (each may have been the first
            one when the old engine created the store).
        namespace: ``--state-namespace``.
        current: the file the rule gives today (never listed).
    """
    found: list[Path] = []
    for base in (config_dir, *models_dirs):
        # normpath: ``models/../models/**`` names the current directory, not an old one
        candidate = Path(os.path.normpath(store_file_in(base.absolute(), namespace)))
        if candidate == current or candidate in found:
            continue
        if not (candidate.exists() or candidate.is_symlink()):
            continue
        if current.exists() and os.path.samefile(candidate, current):
            continue  # the same file reached through a symlinked directory
        found.append(candidate)
    return found


def upstream_store_beside(store: Path) -> Path | None:
    """Upstream Rocky's ``.rocky-state.redb`` in the directory of our store ``store``, when there is one.

    A project moved from upstream Rocky keeps that file; its watermarks and run history are in a format this
    engine does not read, so ``rocky doctor`` and the first run say so instead of starting fresh silently.
    """
    candidate = store.parent / UPSTREAM_FILE
    return candidate if candidate.is_file() else None


def upstream_store_message(redb: Path) -> str:
    """The one line that says an upstream store is there and not read."""
    return (
        f"{redb} is an upstream Rocky state file (redb format); it is not read: this engine keeps its own "
        "SQLite store beside it, and watermarks and run history start fresh"
    )
