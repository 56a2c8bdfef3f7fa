"""``[connector.NAME]``: child connectors (seeds/child-connectors.md, "Configure a connector").

Strict keys: a misspelled limit would otherwise silently run a connector without its cap.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from rocky_engine.config.base import StrictModel

#: The longest wall time a connector attempt may be given (7 days).
MAX_WALL_TIME_SECS = 604800
#: The most extra attempts a connector may be given.
MAX_RETRIES = 10

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConnectorTarget(StrictModel):
    """The table that receives the connector's rows."""

    adapter: str = "default"
    catalog: str = Field(min_length=1)
    schema_: str = Field(alias="schema", min_length=1)
    table: str = Field(min_length=1)

    @property
    def full_name(self) -> str:
        return f"{self.catalog}.{self.schema_}.{self.table}"


class ConnectorLimits(StrictModel):
    """Per-attempt limits; the smaller of these and the manifest's wins (unset: the manifest's or default)."""

    wall_time_secs: int | None = Field(default=None, ge=1, le=MAX_WALL_TIME_SECS)
    cpu_time_secs: int | None = Field(default=None, ge=1)
    memory_bytes: int | None = Field(default=None, ge=1)
    output_bytes: int | None = Field(default=None, ge=1)


class ConnectorConfig(StrictModel):
    """One child connector: its manifest, where it writes, what it may see and where its rows land."""

    manifest: str = Field(min_length=1)
    output_uri: str
    secrets: list[str] = Field(default_factory=list)
    target: ConnectorTarget
    retries: int = Field(default=1, ge=0, le=MAX_RETRIES)
    #: optional data contract checked on the staging table; its shape belongs to the connector runner
    contract: dict[str, Any] | None = None
    limits: ConnectorLimits = Field(default_factory=ConnectorLimits)
    keep_scratch: bool = False
    #: how long a run waits for the state store's writer lock (at the claim, before the promote, to free
    #: its claim) before it fails; see rocky_engine/connectors/state_lock.py
    state_lock_wait_secs: int = Field(default=30, ge=0, le=3600)

    @field_validator("output_uri")
    @classmethod
    def _file_uri_only(cls, value: str) -> str:
        scheme = value.split("://", 1)[0].lower() if "://" in value else ""
        if scheme in ("s3", "gs"):
            raise PydanticCustomError(
                "rocky_output_uri",
                "output_uri {uri} is not supported yet; only file:// works",
                {"uri": value},
            )
        if scheme != "file" or value == "file://":
            raise PydanticCustomError(
                "rocky_output_uri",
                "output_uri must be a file:// URI such as file://./.rocky/landing/<name> (got {uri})",
                {"uri": repr(value)},
            )
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise PydanticCustomError(
                    "rocky_secret_name",
                    "secrets holds environment variable names; {name} is not one (letters, digits, _)",
                    {"name": repr(name)},
                )
        return value

    def output_dir(self, root: Path) -> Path:
        """The local directory of ``output_uri``; a relative path is relative to rocky.toml's directory."""
        raw = unquote(self.output_uri[len("file://") :])
        path = Path(raw).expanduser()
        return path if path.is_absolute() else (root / path)

    def manifest_path(self, root: Path) -> Path:
        """The manifest file, relative to rocky.toml's directory."""
        path = Path(self.manifest).expanduser()
        return path if path.is_absolute() else (root / path)
