"""``${VAR}`` / ``${VAR:-default}`` substitution on raw config text (CONTRACT section 0).

Substitution happens on the TOML text before parsing, so a value can land anywhere (inside a string, as a
number, as a whole table name). It is used for rocky.toml, model sidecars and ``_defaults.toml``; never on
SQL bodies. Lines that are pure TOML comments are left alone: a commented-out secret reference must not make
loading fail in a cron job whose environment lacks that secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from rocky_engine.errors import ConfigError

_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")


def substitute(text: str, env: Mapping[str, str], *, file: Path) -> str:
    """Replace every ``${VAR}`` and ``${VAR:-default}`` in ``text`` with its value from ``env``.

    ``${VAR:-default}`` uses the default when VAR is unset or empty (shell semantics); ``${VAR}`` with VAR
    set to an empty string yields an empty string.

    Raises:
        ConfigError: a ``${VAR}`` without a default names a variable that is not set.
    """
    if "${" not in text:
        return text
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    for line in lines:
        if "${" not in line or line.lstrip().startswith("#"):
            out.append(line)
            continue
        out.append(_REFERENCE.sub(lambda m: _resolve(m, env, file), line))
    return "".join(out)


def _resolve(match: re.Match[str], env: Mapping[str, str], file: Path) -> str:
    name = match.group("name")
    default = match.group("default")
    value = env.get(name)
    if default is not None:
        return value if value else default
    if value is None:
        raise ConfigError(
            f"environment variable {name} is not set (referenced in {file})",
            key=None,
            hint=f"export it or use ${{{name}:-default}}",
        )
    return value


def references(text: str) -> list[str]:
    """The variable names referenced in ``text`` (outside comment lines), in order of first use."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for match in _REFERENCE.finditer(line):
            seen.setdefault(match.group("name"), None)
    return list(seen)
