"""Turn a pydantic ``ValidationError`` into one ``ConfigError`` that names the file, the key and the fix.

Pydantic's own messages ("Extra inputs are not permitted", a loc tuple) are for programmers; a user needs
``rocky.toml: pipeline.orders.execution.concurency: unknown key 'concurency' in
[pipeline.orders.execution]; valid keys: concurrency, ...``. Only the first problem is reported: fixing one
typo at a time is how people edit configs, and later errors are often consequences of the first.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def translate(exc: ValidationError, *, file: Path, prefix: Loc) -> ConfigError:
    """The ConfigError for the first problem in ``exc``; ``prefix`` is where the validated table sits."""
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
            f"unknown key '{key}' in [{dotted(loc)}]; valid keys: {ctx.get('valid', '')}",
            file=file,
            key=dotted([*loc, key]),
            hint="fix the spelling or remove the key",
        )
    if kind == "extra_forbidden":
        return ConfigError(
            f"unknown key '{loc[-1]}' in [{dotted(loc[:-1])}]",
            file=file,
            key=dotted(loc),
            hint="fix the spelling or remove the key",
        )
    if kind == "missing":
        return ConfigError(
            f"missing required key '{loc[-1]}' in [{dotted(loc[:-1])}]",
            file=file,
            key=dotted(loc),
            hint="add it",
        )

    message = _clean(err["msg"])
    if not err["loc"] or kind.startswith("rocky_"):
        # Our own rules (types named rocky_*) and whole-table rules already say what is wrong and show
        # the value where it helps; pydantic's built-in messages need the value to make sense.
        return ConfigError(message, file=file, key=dotted(loc))
    shown = _shown_input(loc, err.get("input"))
    got = f" {shown}" if shown is not None else ""
    return ConfigError(f"invalid value{got}: {message}", file=file, key=dotted(loc))


def _clean(msg: str) -> str:
    for noise in ("Value error, ", "Assertion failed, "):
        if msg.startswith(noise):
            msg = msg[len(noise) :]
    return msg[:1].lower() + msg[1:] if msg[:1].isupper() and not msg[1:2].isupper() else msg


def _shown_input(loc: Loc, value: Any) -> str | None:
    """``repr`` of a short scalar input, or None when it could be a secret or is too long to help."""
    if any(isinstance(p, str) and p in SECRET_KEYS for p in loc):
        return None
    if isinstance(value, bool | int | float | str):
        text = repr(value)
        return text if len(text) <= 80 else None
    return None
