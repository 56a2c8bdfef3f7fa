"""rocky_engine.wire.base: how a document is written and read (omission rules, aliases, ALWAYS per class,
fields written as set, published names, datetimes) and the engine's Result mixin on top of it."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field, ValidationError

from rocky_engine.output import Result, to_json
from rocky_engine.wire.base import WireModel, document_text, published, validation_summary, written_keys


class Inner(WireModel):
    name: str
    note: str | None = None
    tags: list[str] = Field(default_factory=list)


class Plain(BaseModel):
    schema_: str = Field(alias="schema")
    n: int | None = None


class OuterDoc(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"items"})

    kind: str = "outer"
    schema_: str | None = Field(default=None, alias="schema")
    items: list[Inner] = Field(default_factory=list)
    by_name: dict[str, Inner] = Field(default_factory=dict)
    plain: Plain | None = None
    ratio: float | None = None
    flag: bool | None = None


class Outer(OuterDoc, Result):
    def exit_code(self) -> int:
        return 7


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
    # a plain mapping holding models is written the same way (the server's list routes)
    listing = document_text({"items": [Inner(name="a")]})
    assert listing == json.dumps({"items": [{"name": "a"}]}, indent=2) + "\n"


def test_result_mixin_renders_its_document_and_keeps_its_exit_code() -> None:
    out = Outer(items=[Inner(name="a")])
    assert out.render_table() == out.render_md() == to_json(out)
    assert out.exit_code() == 7


def test_reading_ignores_unknown_keys_and_defaults_omitted_optionals() -> None:
    doc = OuterDoc.model_validate({"items": [{"name": "a", "from_a_newer_engine": 1}], "new_top": True})
    assert doc.items == [Inner(name="a")] and doc.kind == "outer" and doc.flag is None


class Measured(WireModel):
    OMIT_UNSET: ClassVar[bool] = True
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"name"})

    name: str = "m"
    value: Any = None
    items: list[str] | None = None


def test_omit_unset_writes_exactly_what_was_set() -> None:
    assert Measured().wire() == {"name": "m"}
    assert Measured(value=None, items=[]).wire() == {"name": "m", "value": None, "items": []}
    later = Measured()
    later.items = []
    assert later.wire() == {"name": "m", "items": []}
    assert Measured.model_validate({"value": None}).wire() == {"name": "m", "value": None}


class Renamed(WireModel):
    rows_copied: int | None = published("rows", None)
    table: str


def test_a_published_name_is_written_too_and_read_when_ours_is_absent() -> None:
    assert Renamed(table="t", rows_copied=3).wire() == {"rows_copied": 3, "table": "t", "rows": 3}
    assert Renamed(table="t").wire() == {"table": "t"}
    assert Renamed.model_validate({"table": "t", "rows": 5}).rows_copied == 5
    assert Renamed.model_validate({"table": "t", "rows_copied": 6}).rows_copied == 6
    assert written_keys(Renamed) == (frozenset({"rows_copied", "rows", "table"}), frozenset({"table"}))


class Stamped(WireModel):
    at: datetime | None = None


def test_datetimes_are_written_in_utc_with_z() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert Stamped(at=datetime(2026, 5, 2, 5, 0, tzinfo=plus2)).wire() == {"at": "2026-05-02T03:00:00Z"}
    assert Stamped(at=datetime(2026, 5, 2, 3, 0, 0, 1500, tzinfo=UTC)).wire() == {
        "at": "2026-05-02T03:00:00.001500Z"
    }
    assert Stamped.model_validate({"at": "2026-05-02T03:00:00Z"}).at == datetime(2026, 5, 2, 3, tzinfo=UTC)


def test_validation_summary_names_the_first_problem() -> None:
    with pytest.raises(ValidationError) as err:
        Inner.model_validate({"name": 3})
    assert validation_summary(err.value) == "name: Input should be a valid string"
    assert validation_summary(ValueError("not json")) == "not json"


def test_the_wire_package_imports_pydantic_and_nothing_heavy() -> None:
    probe = (
        "import sys, pkgutil, importlib, rocky_engine.wire as w\n"
        "for m in pkgutil.iter_modules(w.__path__): importlib.import_module('rocky_engine.wire.' + m.name)\n"
        "engine = sorted(n for n in sys.modules if n.startswith('rocky_engine.') and "
        "not n.startswith('rocky_engine.wire'))\n"
        "heavy = sorted(n for n in ('duckdb', 'pyarrow', 'httpx', 'starlette', 'rich', 'dagster') "
        "if n in sys.modules)\n"
        "print(engine, heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] []"
