"""Reading the TOML files a user writes: rocky.toml, model sidecars, ``_defaults.toml``, connector manifests.

Every way such a file can fail to become a table is one ``ConfigError`` naming the file and the fix: bytes
that are not UTF-8, a file that cannot be read, bad TOML syntax, and arrays or inline tables nested so
deeply that the parser (recursive, in the standard library) runs out of stack. Those used to escape as
``UnicodeDecodeError`` or ``RecursionError`` and reach the user as an "internal error".
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from rocky_engine.errors import ConfigError


def read_text(path: Path, *, label: str) -> str:
    """The text of ``path``.

    Args:
        label: what the file is, for the message (``"config file"``, ``"model sidecar"``).

    Raises:
        ConfigError: the bytes are not UTF-8 (the offset of the first bad byte is named), or the file
            cannot be read.
    """
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the file is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
            file=path,
            hint="save it as UTF-8",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {label} {path}: {exc.strerror or exc}",
            hint="check that it exists and its permissions",
        ) from None


def parse_toml(text: str, *, file: Path) -> dict[str, Any]:
    """Parse ``text`` (read from ``file``) as TOML.

    Raises:
        ConfigError: a syntax error (line and column named), or nesting too deep to parse.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"invalid TOML: {exc}", file=file, hint="fix the syntax at that line and column"
        ) from None
    except RecursionError:
        raise ConfigError(
            "invalid TOML: arrays or inline tables are nested too deeply to read (hundreds of levels)",
            file=file,
            hint="write the value with a few levels of nesting, or as [table] headers",
        ) from None
