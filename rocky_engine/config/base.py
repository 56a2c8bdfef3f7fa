"""Base classes shared by the rocky.toml models.

Two kinds of section exist (CONTRACT section 0): strict ones, where an unknown key is an error because a typo
would silently change behaviour (``[state]``, ``[schedule]``, ``[pipeline.*.schedule|checks|execution]``,
``[connector.*]``), and lenient ones that ignore extra keys so that newer configs still load. A lenient
section remembers the keys it ignored (:meth:`LenientModel.ignored_keys`) so loading can warn about them:
``[adapter] pth = "x.duckdb"`` must not silently become an in-memory database.

The sections that decide when and how a pipeline runs (``[state]``, ``[schedule]``,
``[pipeline.*.schedule]``, ``[pipeline.*.execution]``) are also strictly *typed* (:class:`TypedModel`):
pydantic's lax coercion would read ``freshness = "yes"`` or ``freshness = 1`` as ``true``,
``enabled = "no"`` as ``false`` and ``after = "hourly"`` as ``["hourly"]``, so a typo would change a schedule
without a word. There a value of the wrong TOML type is an error naming the key, the value and the type.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PlainValidator,
    PrivateAttr,
    model_validator,
)
from pydantic_core import PydanticCustomError

Severity = Literal["error", "warning"]


def valid_keys(cls: type[BaseModel]) -> list[str]:
    """The TOML keys a model accepts (aliases where set, e.g. ``schema`` rather than ``schema_``)."""
    return list(_valid_keys(cls))


# Fields are fixed once a class exists, and these run for every table of every pipeline: a project of
# 1,000 pipelines validates ~5,000 tables, so recomputing them per table was a measurable share of loading.
@cache
def _valid_keys(cls: type[BaseModel]) -> tuple[str, ...]:
    return tuple(field.alias or name for name, field in cls.model_fields.items())


@cache
def _accepted(cls: type[BaseModel]) -> frozenset[str]:
    # populate_by_name: both the alias (``schema``) and the field name (``schema_``) are accepted.
    return frozenset(_valid_keys(cls)) | frozenset(cls.model_fields)


class LenientModel(BaseModel):
    """A config section that ignores keys it does not know (and remembers them, for a warning)."""

    # defer_build (here and in StrictModel): a section's validator is built the first time a table of
    # that kind is validated, so a project pays only for the section types it uses, not for every model
    # that importing the config package defines.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, defer_build=True)

    _ignored: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_unknown_keys(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        model = handler(data)
        # Only raw TOML tables carry keys; an already built model passed through keeps what it had.
        if isinstance(data, dict) and isinstance(model, LenientModel):
            accepted = _accepted(cls)
            model._ignored = tuple(str(k) for k in data if k not in accepted)
        return model

    def ignored_keys(self) -> tuple[str, ...]:
        """The keys of this table (not of nested ones) that loading ignored, in file order."""
        # Straight from pydantic's private store: ``self._ignored`` takes BaseModel.__getattr__'s slow
        # path, and loading asks every table of every pipeline.
        private = self.__pydantic_private__
        return private.get("_ignored", ()) if private else ()

    def ignored_key_note(self, suggestion: str | None) -> str | None:
        """What ignoring a key means here, when a table can say more (``suggestion``: the likely key)."""
        return None


class StrictModel(BaseModel):
    """A config section where an unknown key is an error naming the valid keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        # Runs before field validation so the user sees "unknown key" (the likely typo) rather than a
        # "missing key" error for the key they meant to write.
        if isinstance(data, dict):
            accepted = _accepted(cls)
            for key in data:
                if key not in accepted:
                    raise PydanticCustomError(
                        "rocky_unknown_key",
                        "unknown key '{key}'; valid keys: {valid}",
                        {"key": str(key), "valid": ", ".join(_valid_keys(cls))},
                    )
        return data


class TypedModel(StrictModel):
    """A strict section whose values must also have the TOML type the key takes (no coercion)."""

    model_config = ConfigDict(strict=True)


def _scalar(value: Any) -> int | float | str:
    # bool is an int subclass in Python; a threshold of `true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PydanticCustomError("scalar_type", "expected a number or a string")
    return value


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("number_type", "expected a number")
    return value


#: A TOML number or string (thresholds, bounds); bools are refused.
Scalar = Annotated[int | float | str, PlainValidator(_scalar)]
#: A TOML integer or float; bools and strings are refused.
Number = Annotated[int | float, PlainValidator(_number)]


def numeric_text(text: str) -> int | float | None:
    """The number a string holds (``"0"``, ``" 1.5 "``, ``"1e3"``), or None (not finite: None too)."""
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        number = float(stripped)
    except ValueError:
        return None
    return None if number != number or number in (float("inf"), float("-inf")) else number


def _number_or_numeric(value: Any) -> int | float:
    # Upstream Rocky reads assertion bounds as strings (``value = "0"``); a string holding a number is
    # that number, anything else is still refused rather than compared as text.
    if isinstance(value, str):
        number = numeric_text(value)
        if number is None:
            raise PydanticCustomError(
                "number_type", "expected a number (got the string {value})", {"value": repr(value)}
            )
        return number
    return _number(value)


def _bound(value: Any) -> int | float | str:
    # A bound may be text (a date: "2024-01-01"); one that reads as a number is that number, as upstream.
    scalar = _scalar(value)
    if isinstance(scalar, str):
        number = numeric_text(scalar)
        return scalar if number is None else number
    return scalar


#: A TOML number, or a string that reads as one (``"0"``, ``"1.5"``); bools and other strings are refused.
NumberOrNumeric = Annotated[int | float, PlainValidator(_number_or_numeric)]
#: A TOML number or string; a string that reads as a number becomes that number; bools are refused.
Bound = Annotated[int | float | str, PlainValidator(_bound)]
