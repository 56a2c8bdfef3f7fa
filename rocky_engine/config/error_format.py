"""Turn a pydantic ``ValidationError`` into one ``ConfigError`` that names the file, the key and the fix.

Pydantic's own messages ("Extra inputs are not permitted", a loc tuple) are for programmers; a user needs
``rocky.toml: pipeline.orders.execution.concurency: unknown key 'concurency' in
[pipeline.orders.execution]; valid keys: concurrency, ...``. Only the first problem is reported: fixing one
typo at a time is how people edit configs, and later errors are often consequences of the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rocky_engine.errors import ConfigError

#: Keys whose values must never be echoed back in an error message.
SECRET_KEYS = frozenset({"dsn", "password", "api_key", "api_secret", "secret", "token", "headers", "env"})

Loc = Sequence[str | int]


def dotted(parts: Loc) -> str:
    """A key path as people write it: ``("pipeline", "q", "assertions", 0, "values")`` ->
    ``pipeline.q.assertions[0].values``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def where(loc: Loc, file: Path) -> str:
    """Where a key sits, for a message: ``in [pipeline.m.execution]``, or ``at the top level of
    connector.toml`` for a file validated as a whole (``in []`` named nothing a user can find)."""
    return f"in [{dotted(loc)}]" if loc else f"at the top level of {file.name}"


def translate(
    exc: ValidationError, *, file: Path, prefix: Loc, missing_hints: Mapping[str, str] | None = None
) -> ConfigError:
    """The ConfigError for the first problem in ``exc``; ``prefix`` is where the validated table sits.

    Args:
        missing_hints: the fix for a missing required key, by dotted key, where "add it" says too little.
    """
    errors = exc.errors(include_url=False)
    if not errors:  # pragma: no cover - pydantic never raises an empty ValidationError
        return ConfigError("invalid configuration", file=file, key=dotted(prefix))
    err = errors[0]
    loc: list[str | int] = [*prefix, *err["loc"]]
    kind = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})

    if kind == "rocky_unknown_key":
        key = str(ctx.get("key", ""))
        return ConfigError(
            f"unknown key '{key}' {where(loc, file)}; valid keys: {ctx.get('valid', '')}",
            file=file,
            key=dotted([*loc, key]),
            hint="fix the spelling or remove the key",
        )
    if kind == "extra_forbidden":
        return ConfigError(
            f"unknown key '{loc[-1]}' {where(loc[:-1], file)}",
            file=file,
            key=dotted(loc),
            hint="fix the spelling or remove the key",
        )
    if kind == "missing":
        return ConfigError(
            f"missing required key '{loc[-1]}' {where(loc[:-1], file)}",
            file=file,
            key=dotted(loc),
            hint=(missing_hints or {}).get(dotted(loc), "add it"),
        )

    if kind in _EXPECTED:
        return _type_error(loc, kind, err.get("input"), file)
    message = _clean(err["msg"])
    if not err["loc"] or kind.startswith("rocky_"):
        # Our own rules (types named rocky_*) and whole-table rules already say what is wrong and show
        # the value where it helps; pydantic's built-in messages need the value to make sense.
        return ConfigError(message, file=file, key=dotted(loc))
    shown = _shown_input(loc, err.get("input"))
    got = f" {shown}" if shown is not None else ""
    return ConfigError(f"invalid value{got}: {message}", file=file, key=dotted(loc))


#: pydantic's type-error kinds -> the TOML type the key takes
_EXPECTED = {
    "bool_type": "a boolean (true or false)",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
}
_HINTS = {
    "bool_type": "write true or false, without quotes",
    "int_type": "write a whole number, without quotes",
    "int_from_float": "write a whole number, without quotes",
    "float_type": "write a number, without quotes",
    "string_type": "put the value in double quotes",
}


def _type_error(loc: Loc, kind: str, value: Any, file: Path) -> ConfigError:
    """``pipeline.p.schedule.freshness: expected a boolean (true or false), got the string "yes"``."""
    key = dotted(loc)
    got = toml_value(value, secret=_is_secret(loc))
    hint = _HINTS.get(kind)
    if kind == "list_type" and isinstance(value, str) and not _is_secret(loc):
        hint = f"write {loc[-1]} = [{toml_literal(value)}]"
    elif kind in ("dict_type", "model_type"):
        hint = f"write {loc[-1]} = {{ key = value }} or a [{key}] table"
    return ConfigError(f"expected {_EXPECTED[kind]}, got {got}", file=file, key=key, hint=hint)


def toml_value(value: Any, *, secret: bool = False) -> str:
    """How a parsed TOML value reads in a message: ``the string "yes"``, ``the integer 1``, ``an array``."""
    if isinstance(value, bool):
        return f"the boolean {toml_literal(value)}"
    kinds = ((int, "the integer"), (float, "the number"), (str, "the string"))
    for cls, name in kinds:
        if isinstance(value, cls):
            if secret:
                return name.replace("the ", "a ", 1)
            text = toml_literal(value)
            return f"{name} {text}" if len(text) <= 80 else name.replace("the ", "a ", 1)
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time" if value is not None else "nothing"


def toml_literal(value: bool | int | float | str) -> str:
    # repr of a str is a TOML literal string ('yes') for every value worth showing; a bool is lower case
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _is_secret(loc: Loc) -> bool:
    return any(isinstance(p, str) and p in SECRET_KEYS for p in loc)


def _clean(msg: str) -> str:
    for noise in ("Value error, ", "Assertion failed, "):
        if msg.startswith(noise):
            msg = msg[len(noise) :]
    return msg[:1].lower() + msg[1:] if msg[:1].isupper() and not msg[1:2].isupper() else msg


def _shown_input(loc: Loc, value: Any) -> str | None:
    """``repr`` of a short scalar input, or None when it could be a secret or is too long to help."""
    if _is_secret(loc):
        return None
    if isinstance(value, bool | int | float | str):
        text = toml_literal(value)
        return text if len(text) <= 80 else None
    return None
