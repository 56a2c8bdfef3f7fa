"""Base classes shared by the rocky.toml models.

Two kinds of section exist (CONTRACT section 0): strict ones, where an unknown key is an error because a typo
would silently change behaviour (``[state]``, ``[schedule]``, ``[pipeline.*.schedule|checks|execution]``,
``[connector.*]``), and lenient ones that ignore extra keys so that newer configs still load.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, PlainValidator, model_validator
from pydantic_core import PydanticCustomError

Severity = Literal["error", "warning"]


class LenientModel(BaseModel):
    """A config section that ignores keys it does not know."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def valid_keys(cls: type[BaseModel]) -> list[str]:
    """The TOML keys a model accepts (aliases where set, e.g. ``schema`` rather than ``schema_``)."""
    return [field.alias or name for name, field in cls.model_fields.items()]


class StrictModel(BaseModel):
    """A config section where an unknown key is an error naming the valid keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        # Runs before field validation so the user sees "unknown key" (the likely typo) rather than a
        # "missing key" error for the key they meant to write.
        if isinstance(data, dict):
            accepted = set(valid_keys(cls)) | set(cls.model_fields)
            for key in data:
                if key not in accepted:
                    raise PydanticCustomError(
                        "rocky_unknown_key",
                        "unknown key '{key}'; valid keys: {valid}",
                        {"key": str(key), "valid": ", ".join(valid_keys(cls))},
                    )
        return data


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
