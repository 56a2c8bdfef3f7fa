"""Resolving a manifest's ``command`` (the manifest itself is read by ``config.connector_manifest``).

The first element of ``command`` is resolved like a shell would, but against the manifest directory rather
than the working directory (the program runs in its scratch directory): a relative path with a slash is
relative to the manifest's directory, a bare name is looked up on ``PATH``. Other elements are passed as
they are.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rocky_engine.config.connector_manifest import LoadedManifest
from rocky_engine.errors import ConfigError


def resolve_command(loaded: LoadedManifest, search_path: str | None) -> list[str]:
    """The argv to start: the first element made absolute, the rest unchanged.

    Args:
        loaded: the manifest.
        search_path: the ``PATH`` the program will get (bare names are looked up there).

    Raises:
        ConfigError: the program does not exist or is not executable.
    """
    first, *rest = loaded.manifest.command
    if "/" in first:
        program = Path(first).expanduser()
        if not program.is_absolute():
            program = loaded.directory / program
        if not program.is_file():
            raise ConfigError(
                f"connector program {program} does not exist",
                file=loaded.path,
                key="command",
                hint="a relative first element of command is relative to the manifest's directory",
            )
        if not os.access(program, os.X_OK):
            raise ConfigError(
                f"connector program {program} is not executable",
                file=loaded.path,
                key="command",
                hint=f"chmod +x {program}, or start it through an interpreter: [\"python3\", \"{first}\"]",
            )
        return [str(program), *rest]
    found = shutil.which(first, path=search_path if search_path is not None else os.defpath)
    if found is None:
        raise ConfigError(
            f"connector program '{first}' was not found on PATH",
            file=loaded.path,
            key="command",
            hint="install it, put it on PATH, or write a path such as ./main.py",
        )
    return [found, *rest]
