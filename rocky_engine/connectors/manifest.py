"""``connector.toml``: the manifest a connector author ships next to the program.

Strict like ``[connector.*]`` (CONTRACT section 0): an unknown key is refused, because a misspelled limit
would silently run the program without its cap, and a missing ``egress_hosts`` is refused because the list
is the author's statement of which hosts the program calls (``[]`` for none). ``protocol_version`` must be
0, the only protocol this engine speaks.

The first element of ``command`` is resolved like a shell would, but against the manifest directory rather
than the working directory (the program runs in its scratch directory): a relative path with a slash is
relative to the manifest's directory, a bare name is looked up on ``PATH``. Other elements are passed as
they are.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from rocky_engine.config.base import StrictModel
from rocky_engine.config.connectors import ConnectorLimits
from rocky_engine.config.error_format import translate
from rocky_engine.config.toml_file import parse_toml, read_text
from rocky_engine.errors import ConfigError
from rocky_engine.wire.connector import PROTOCOL_VERSION

#: The one protocol version this engine implements.


class Manifest(StrictModel):
    """A validated ``connector.toml``."""

    protocol_version: int
    name: str = Field(min_length=1)
    command: list[str]
    state_schema_version: int = Field(ge=0)
    egress_hosts: list[str]
    limits: ConnectorLimits = Field(default_factory=ConnectorLimits)

    @field_validator("protocol_version", mode="before")
    @classmethod
    def _protocol_zero(cls, value: object) -> object:
        if isinstance(value, bool) or value != PROTOCOL_VERSION:
            raise PydanticCustomError(
                "rocky_protocol_version",
                "protocol_version must be 0 (got {got}); this rocky speaks child connector protocol 0 only",
                {"got": repr(value)},
            )
        return value

    @field_validator("command")
    @classmethod
    def _command_not_empty(cls, value: list[str]) -> list[str]:
        if not value or not value[0].strip():
            raise PydanticCustomError(
                "rocky_command",
                "command must not be empty; write the program and its arguments, e.g. [\"./main.py\"]",
            )
        return value


@dataclass(frozen=True)
class LoadedManifest:
    """A manifest with the place it came from (relative command paths start there)."""

    manifest: Manifest
    path: Path

    @property
    def directory(self) -> Path:
        return self.path.parent


def load_manifest(path: Path) -> LoadedManifest:
    """Read and validate the manifest at ``path``.

    Raises:
        ConfigError: the file is missing, is not TOML, or breaks a manifest rule (file, key and fix).
    """
    if not path.exists():
        raise ConfigError(
            f"connector manifest {path} does not exist",
            hint="fix `manifest` in [connector.<name>] (relative paths start at rocky.toml's directory)",
        )
    raw = parse_toml(read_text(path, label="connector manifest"), file=path)
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise translate(exc, file=path, prefix=()) from None
    return LoadedManifest(manifest=manifest, path=path.absolute())


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
