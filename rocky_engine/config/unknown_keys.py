"""Warnings for keys a lenient rocky.toml table ignored (CONTRACT section 0).

Strict tables reject an unknown key; every other table loads without it, and a typo there
(``[adapter.default] pth = "x.duckdb"``, ``modles = ...``) would otherwise change behaviour without a word.
Each ignored key becomes one warning in ``RockyConfig.warnings`` naming the key, the table, a likely
intended key and the valid ones; ``rocky run``, ``rocky validate`` (V012) and ``rocky doctor`` show them.
"""

from __future__ import annotations

import difflib

from pydantic import BaseModel

from rocky_engine.config.base import LenientModel, valid_keys
from rocky_engine.config.error_format import Loc, dotted


def suggest(key: str, valid: list[str]) -> str | None:
    """The valid key ``key`` is most likely a misspelling of, or None."""
    close = difflib.get_close_matches(key, valid, n=1)
    return close[0] if close else None


def unknown_key_message(
    key: str, table: str, valid: list[str], suggestion: str | None = None, note: str | None = None
) -> str:
    """``unknown key 'pth' in [adapter.default] is ignored; did you mean 'path'? valid keys: ...``."""
    guess = f" did you mean '{suggestion}'?" if suggestion else ""
    tail = f" ({note})" if note else ""
    return f"unknown key '{key}' in [{table}] is ignored;{guess} valid keys: {', '.join(sorted(valid))}{tail}"


def unknown_key_warnings(model: BaseModel, prefix: Loc) -> list[str]:
    """One warning per ignored key in ``model`` and the tables nested in it, in file order.

    Args:
        model: a validated section (an adapter, a pipeline, a hook ...).
        prefix: the key path the section was read from (``("adapter", "default")``).
    """
    warnings: list[str] = []
    _walk(model, list(prefix), warnings)
    return warnings


def _walk(value: object, loc: list[str | int], out: list[str]) -> None:
    if isinstance(value, BaseModel):
        if isinstance(value, LenientModel):
            valid = valid_keys(type(value))
            table = dotted(loc)
            for key in value.ignored_keys():
                suggestion = suggest(key, valid)
                note = value.ignored_key_note(suggestion)
                out.append(unknown_key_message(key, table, valid, suggestion, note))
        for name, field in type(value).model_fields.items():
            _walk(getattr(value, name), [*loc, field.alias or name], out)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _walk(item, [*loc, i], out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(item, [*loc, str(key)], out)
