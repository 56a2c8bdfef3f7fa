"""Warnings for keys a lenient rocky.toml table ignored (CONTRACT section 0).

Strict tables reject an unknown key; every other table loads without it, and a typo there
(``[adapter.default] pth = "x.duckdb"``, ``modles = ...``) would otherwise change behaviour without a word.
Each ignored key becomes one warning in ``RockyConfig.warnings`` naming the key, the table, a likely
intended key and the valid ones; ``rocky run``, ``rocky validate`` (V012) and ``rocky doctor`` show them.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel

from rocky_engine.config.base import LenientModel, valid_keys
from rocky_engine.config.error_format import Loc, dotted

# Leaf types that never hold a table: fields of these types are not walked.
_LEAVES: tuple[object, ...] = (str, int, float, bool, bytes, type(None))
_CONTAINERS = (BaseModel, list, tuple, dict, set, frozenset)


def suggest(key: str, valid: list[str]) -> str | None:
    """The valid key ``key`` is most likely a misspelling of, or None."""
    import difflib  # only when a key was ignored: loading a clean config never needs it

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
        if isinstance(value, LenientModel) and (ignored := value.ignored_keys()):
            valid = valid_keys(type(value))
            table = dotted(loc)
            for key in ignored:
                suggestion = suggest(key, valid)
                note = value.ignored_key_note(suggestion)
                out.append(unknown_key_message(key, table, valid, suggestion, note))
        for name, key in _nested_fields(type(value)):
            _walk(getattr(value, name), [*loc, key], out)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _walk(item, [*loc, i], out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(item, [*loc, str(key)], out)


@cache
def _nested_fields(cls: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """(field name, TOML key) of the fields of ``cls`` that can hold a table, in declaration order.

    Walking only these keeps warnings identical (a scalar field holds no ignored keys) while a project of
    1,000 pipelines visits ~10 values per pipeline instead of ~50.
    """
    return tuple(
        (name, field.alias or name)
        for name, field in cls.model_fields.items()
        if _may_hold_model(field.annotation)
    )


def _may_hold_model(annotation: Any) -> bool:
    """False only when ``annotation`` certainly holds no pydantic model (anything unknown: True)."""
    if any(annotation is leaf for leaf in _LEAVES):  # identity: an annotation need not be hashable
        return False
    if annotation is Any or annotation is object:
        return True
    if isinstance(annotation, type) and get_origin(annotation) is None:
        # a bare class: a model, or a container whose items are unknown (list, dict), may hold one
        return issubclass(annotation, _CONTAINERS)
    origin = get_origin(annotation)
    if origin is Literal:
        return False
    if origin is Annotated:
        return _may_hold_model(get_args(annotation)[0])
    if origin is not None:  # unions and generic containers: any argument may hold one
        args = get_args(annotation)
        return not args or any(_may_hold_model(a) for a in args if a is not Ellipsis)
    return True
