"""rocky_engine.output: the wire form of results (omission rules, aliases, ALWAYS per class, nesting)."""

from __future__ import annotations

import json
from typing import ClassVar

from pydantic import BaseModel, Field

from rocky_engine.output import Result, WireModel, to_json


class Inner(WireModel):
    name: str
    note: str | None = None
    tags: list[str] = Field(default_factory=list)


class Plain(BaseModel):
    schema_: str = Field(alias="schema")
    n: int | None = None


class Outer(Result):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"items"})

    kind: str = "outer"
    schema_: str | None = Field(default=None, alias="schema")
    items: list[Inner] = Field(default_factory=list)
    by_name: dict[str, Inner] = Field(default_factory=dict)
    plain: Plain | None = None
    ratio: float | None = None
    flag: bool | None = None


class OuterAlways(Outer):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"items", "flag"})


def test_empty_optionals_are_omitted_and_always_fields_kept() -> None:
    assert Outer().wire() == {"kind": "outer", "items": []}
    # the same fields, another ALWAYS: each class has its own omission rules
    assert OuterAlways().wire() == {"kind": "outer", "items": [], "flag": None}
    assert Outer().wire() == {"kind": "outer", "items": []}


def test_nested_values_aliases_and_falsy_scalars() -> None:
    out = Outer(
        schema="s",
        items=[Inner(name="a"), Inner(name="b", note="n", tags=["x"])],
        by_name={"c": Inner(name="c")},
        plain=Plain(schema="p"),
        ratio=0.0,
        flag=False,
    )
    assert out.wire() == {
        "kind": "outer",
        "schema": "s",
        "items": [{"name": "a"}, {"name": "b", "note": "n", "tags": ["x"]}],
        "by_name": {"c": {"name": "c"}},
        "plain": {"schema": "p", "n": None},
        "ratio": 0.0,
        "flag": False,
    }


def test_json_document_is_indented_with_a_trailing_newline() -> None:
    text = to_json(Outer(items=[Inner(name="a")]))
    assert text == json.dumps({"kind": "outer", "items": [{"name": "a"}]}, indent=2) + "\n"
