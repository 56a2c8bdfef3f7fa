"""``connector.toml``: the manifest a connector author ships next to the program, and its one loader.

Strict like ``[connector.*]`` (CONTRACT section 0): an unknown key is refused, because a misspelled limit
would silently run the program without its cap, and a missing ``egress_hosts`` is refused because the list
is the author's statement of which hosts the program calls (``[]`` for none). ``protocol_version`` must be
0, the only protocol this engine speaks.

It sits in the config layer because two commands read it: ``rocky load --connector`` (through
``connectors.preflight``) and ``rocky validate`` (``config.validation``, V019), which must refuse exactly
what the load refuses, in the same words, without importing the connector runner.
"""

from __future__ import annotations

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

#: What to write when a required manifest key is missing (the generic "add it" says too little here).
_MISSING_HINTS = {
    "protocol_version": "add protocol_version = 0",
    "name": 'add name = "<the connector\'s name>"',
    "command": 'add command = ["./main.py"] (the program and its arguments)',
    "state_schema_version": "add state_schema_version = 1 (the version of the state the program writes)",
    "egress_hosts": 'list the hosts the program calls (egress_hosts = ["api.example.com"]), or write '
    "egress_hosts = [] for a program that calls no host",
}


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


def load_manifest(path: Path, *, connector: str | None = None) -> LoadedManifest:
    """Read and validate the manifest at ``path``.

    Args:
        connector: the ``[connector.NAME]`` that points here, named in the fix for a missing file.

    Raises:
        ConfigError: the file is missing, is not TOML, or breaks a manifest rule (file, key and fix).
    """
    if not path.exists():
        table = f"[connector.{connector}]" if connector else "[connector.<name>]"
        raise ConfigError(
            f"connector manifest {path} does not exist",
            hint=f"fix `manifest` in {table} (relative paths start at rocky.toml's directory) or add the "
            "connector.toml",
        )
    raw = parse_toml(read_text(path, label="connector manifest"), file=path)
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise translate(exc, file=path, prefix=(), missing_hints=_MISSING_HINTS) from None
    return LoadedManifest(manifest=manifest, path=path.absolute())
