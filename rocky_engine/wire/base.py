"""The base of every wire model: how a document is written (CONTRACT section 0) and how it is read.

Writing (``WireModel.wire()``): optional fields that are empty or unknown (``None``, ``[]``, ``{}``) are
omitted; required fields and the fields a class lists in ``ALWAYS`` are always written (``null`` / ``[]``
included). A class with ``OMIT_UNSET = True`` writes instead exactly the fields it was given (a check
writes the details it measured, a ``null`` result included). Datetimes are written in UTC with ``Z``.

Reading (``Model.model_validate(doc)``): unknown keys are ignored, so a document from a newer engine that
adds fields still parses; an omitted optional field takes its default. The strict reading (no key the
model does not declare, every always-written key present) is what ``tests/engine/wire`` asserts of every
document the engine prints: the models stay lenient for ``dagster_rocky``.

Published names: when the published client (``rocky-sdk``) names a field differently, the one-line change
is the field's declaration, ``rows_copied: int | None = published("rows", None)``: the value is then
written under both keys, and a document that carries only the published key reads into our field.

This package is the bottom layer: it imports pydantic and the standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticUndefined


def is_empty(value: Any) -> bool:
    """What the omission rule drops: ``None`` and empty lists, tuples and objects."""
    return value is None or (isinstance(value, list | dict | tuple) and len(value) == 0)


class WireModel(BaseModel):
    """A JSON wire object: optional empty fields are dropped, ``ALWAYS`` fields are always written."""

    # defer_build: a class's validator is built when it is first instantiated, not at import, so a
    # command builds only the result types it returns (every model is importable from everywhere;
    # building them all cost a quiet `rocky tick` milliseconds it has no use for).
    model_config = ConfigDict(populate_by_name=True, defer_build=True, extra="ignore")

    #: Fields written even when ``None`` or empty (the contract lists them as required).
    ALWAYS: ClassVar[frozenset[str]] = frozenset()
    #: True: a field is written when it was set (or is required / ``ALWAYS``), whatever its value.
    OMIT_UNSET: ClassVar[bool] = False
    #: fields written after all the others, in this order (a base's field that a document puts last).
    WRITE_LAST: ClassVar[tuple[str, ...]] = ()

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict of this object, with the omission rules applied recursively."""
        cls = type(self)
        given = self.model_fields_set if cls.OMIT_UNSET else None
        out: dict[str, Any] = {}
        for name, key, required, published in _wire_fields(cls):
            value = getattr(self, name)
            if not required and (name not in given if given is not None else is_empty(value)):
                continue
            out[key] = _wire_value(value)
            if published is not None:
                out[published] = out[key]
        return out


def published(key: str, default: Any = PydanticUndefined, **field: Any) -> Any:
    """A field the published client (``rocky-sdk``) knows as ``key``: written under both names (with one
    value), read from either (the published one when a document carries both)."""
    return Field(default, validation_alias=key, json_schema_extra={"published": key}, **field)


def _published_key(field: Any) -> str | None:
    extra = field.json_schema_extra
    key = extra.get("published") if isinstance(extra, dict) else None
    return key if isinstance(key, str) else None


@cache
def _wire_fields(cls: type[WireModel]) -> tuple[tuple[str, str, bool, str | None], ...]:
    """(attribute, JSON key, always written, published key) per field, computed once per class: a tick over
    1,000 pipelines wires ~3,000 objects, and pydantic's field metadata is slow to query per object."""
    last = {name: i for i, name in enumerate(cls.WRITE_LAST)}
    names = sorted(cls.model_fields, key=lambda name: last.get(name, -1))
    return tuple(
        (name, field.alias or name, field.is_required() or name in cls.ALWAYS, _published_key(field))
        for name, field in ((name, cls.model_fields[name]) for name in names)
    )


def written_keys(cls: type[WireModel]) -> tuple[frozenset[str], frozenset[str]]:
    """(every key ``cls`` may write, the keys it always writes): what the strict reading checks."""
    fields = _wire_fields(cls)
    may = {key for _, key, _, _ in fields} | {p for _, _, _, p in fields if p}
    must = {key for _, key, required, _ in fields if required}
    must |= {p for _, _, required, p in fields if required and p}
    return frozenset(may), frozenset(must)


_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_SCALARS = frozenset({str, int, float, bool, type(None)})


def utc_text(moment: datetime) -> str:
    """A datetime as written on the wire: ISO 8601 in UTC with ``Z`` (naive values are taken as UTC)."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat().replace("+00:00", "Z")


def timestamp_text(value: str) -> str:
    """A watermark as the published client reads it: a timestamp value in UTC with ``Z`` (a naive one is
    UTC, as the engine stores it); any other value (an integer cursor) unchanged."""
    if not _TIMESTAMP.match(value):
        return value
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return utc_text(moment)


def _wire_value(value: Any) -> Any:
    if type(value) in _SCALARS:  # most values: nothing to convert
        return value
    if isinstance(value, WireModel):
        return value.wire()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, datetime):
        return utc_text(value)
    if isinstance(value, list | tuple):
        return [_wire_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _wire_value(v) for k, v in value.items()}
    return value


def document_text(doc: WireModel | Mapping[str, Any]) -> str:
    """One JSON document as the CLI and the server write it: 2-space indent, trailing newline."""
    data = doc.wire() if isinstance(doc, WireModel) else _wire_value(dict(doc))
    return json.dumps(data, indent=2, default=str) + "\n"


def validation_summary(exc: BaseException) -> str:
    """One line saying why a document did not read: the first problem of a pydantic ``ValidationError``
    (``files.0.rows: Input should be ...``), else the error's own text."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    message = str(first.get("msg", ""))
    return f"{loc}: {message}" if loc else message
