"""The one redactor: every secret value the engine knows is replaced by ``${NAME}`` wherever text leaves it.

The secrets are known from the config (rocky_engine/config/secrets.py collects them when rocky.toml loads:
connector ``secrets``, adapter passwords and DSNs, hook ``env`` values, webhook URLs, headers and secrets,
and ``${VAR}`` values that came from secrets-like keys). :func:`set_known` installs them for the process;
every surface applies the same :func:`redact` / :func:`redact_deep`:

- log lines (rocky_engine/logs.py formats every record through it, the child connector's output and the
  hooks' stderr included);
- JSON, table and markdown documents on stdout, the CLI's ``error:`` line, the server's responses;
- run records and server job rows in the state store, and incident bundles.

A value is replaced whole, and a multi-line value (a PEM key) also line by line, so a program that prints
the key one line at a time, or a message that quotes one line of it, leaks none of it. Each piece must be
at least :data:`MIN_BYTES` long: shorter values would match ordinary text (a known gap, documented). The
JSON-escaped form of a value is replaced too (a log line or message that embeds a JSON text).

This module sits with ``logs`` at the bottom of the layers: it imports nothing of the engine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

#: Pieces shorter than this are not redacted (they would match too much text).
MIN_BYTES = 8


def _pieces(value: str) -> list[str]:
    """What to look for: the whole value, its JSON-escaped form, and each of its lines."""
    found = [value]
    escaped = json.dumps(value)[1:-1]
    if escaped != value:
        found.append(escaped)
    if "\n" in value or "\r" in value:
        for line in value.splitlines():
            found.append(line)
            stripped = line.strip()
            if stripped != line:
                found.append(stripped)
    return [p for p in found if len(p.encode("utf-8")) >= MIN_BYTES]


class Redactor:
    """Replaces every known secret piece by ``${NAME}``, longest piece first (a line of a key never
    breaks the replacement of the whole key)."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._names: dict[str, str] = {}
        self._pairs: list[tuple[str, str]] = []
        for name, value in (secrets or {}).items():
            self.add(name, value)

    def add(self, name: str, value: str) -> None:
        """Know ``value`` as ``${name}`` (the first name given for a value is kept)."""
        changed = False
        for piece in _pieces(value):
            if piece not in self._names:
                self._names[piece] = name
                changed = True
        if changed:
            self._pairs = sorted(((p, "${" + n + "}") for p, n in self._names.items()),
                                 key=lambda pair: len(pair[0]), reverse=True)

    def merged(self, other: Redactor) -> Redactor:
        """A redactor knowing this one's secrets and ``other``'s."""
        both = Redactor()
        for piece, name in [*self._names.items(), *other._names.items()]:
            both.add(name, piece)
        return both

    @property
    def longest(self) -> int:
        """Bytes of the longest piece (a cut line keeps this much minus one for the next piece)."""
        return max((len(p.encode("utf-8")) for p in self._names), default=0)

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __call__(self, text: str) -> str:
        for piece, replacement in self._pairs:
            if piece in text:
                text = text.replace(piece, replacement)
        return text

    def deep(self, value: Any) -> Any:
        """``value`` with every string in it (dict keys included) redacted; other values unchanged."""
        if not self._pairs:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self.deep(k): self.deep(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.deep(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.deep(v) for v in value)
        return value


_lock = threading.Lock()
_known = Redactor()


def set_known(secrets: Redactor) -> None:
    """Install the secrets of the project this process works on (replacing those of an earlier load)."""
    global _known
    with _lock:
        _known = secrets


def register(name: str, value: str) -> None:
    """Add one secret to the process's redactor (e.g. a value only a connector run reads)."""
    global _known
    with _lock:
        _known = _known.merged(Redactor({name: value}))


def known() -> Redactor:
    return _known


def redact(text: str) -> str:
    """``text`` with every secret the process knows replaced by ``${NAME}``."""
    return _known(text)


def redact_deep(value: Any) -> Any:
    return _known.deep(value)
