"""The strict reading of a document: what the lenient wire models do not check, the tests do.

``assert_strict(doc, Model)``: ``doc`` validates against ``Model``; at every level no key is one the model
does not declare and every key the model always writes is present; no check reads as an unknown kind; and
reading then writing gives back exactly ``doc`` (so no value was coerced or dropped on the way).
"""

from __future__ import annotations

from typing import Any, TypeVar

from rocky_engine.wire.base import WireModel, written_keys
from rocky_engine.wire.checks import UnknownCheck

M = TypeVar("M", bound=WireModel)


def assert_strict(doc: Any, model: type[M]) -> M:
    """Validate ``doc`` strictly against ``model`` and return the parsed document."""
    assert isinstance(doc, dict), f"not a JSON object: {doc!r}"
    parsed = model.model_validate(doc)
    problems: list[str] = []
    _walk(parsed, doc, model.__name__, problems)
    assert not problems, f"{model.__name__} does not match the document:\n  " + "\n  ".join(problems)
    rewritten = parsed.wire()
    assert rewritten == doc, (
        f"{model.__name__}: reading and writing changed the document:\n{rewritten}\n!=\n{doc}"
    )
    return parsed


def _walk(obj: WireModel, doc: dict[str, Any], path: str, problems: list[str]) -> None:
    cls = type(obj)
    if isinstance(obj, UnknownCheck):
        problems.append(f"{path}: a check of no known kind: {doc}")
        return
    may, must = written_keys(cls)
    extra = sorted(set(doc) - may)
    missing = sorted(must - set(doc))
    if extra:
        problems.append(f"{path} ({cls.__name__}): keys the model does not declare: {extra}")
    if missing:
        problems.append(f"{path} ({cls.__name__}): always-written keys missing: {missing}")
    for name, field in cls.model_fields.items():
        key = field.alias or name
        if key in doc:
            _descend(getattr(obj, name), doc[key], f"{path}.{key}", problems)


def _descend(value: Any, doc: Any, path: str, problems: list[str]) -> None:
    if isinstance(value, WireModel):
        if not isinstance(doc, dict):
            problems.append(f"{path}: expected an object, got {doc!r}")
            return
        _walk(value, doc, path, problems)
    elif isinstance(value, list) and isinstance(doc, list):
        for i, (item, raw) in enumerate(zip(value, doc, strict=True)):
            _descend(item, raw, f"{path}[{i}]", problems)
    elif isinstance(value, dict) and isinstance(doc, dict):
        for key, item in value.items():
            _descend(item, doc.get(key), f"{path}.{key}", problems)
