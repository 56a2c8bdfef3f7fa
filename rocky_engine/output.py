"""One place that renders command results and maps them to exit codes.

Every command returns a :class:`Result` (a pydantic model). JSON goes to stdout as one document with a
2-space indent and a trailing newline; optional fields that are empty are omitted (CONTRACT section 0).
For people, a result renders itself as a table (``render_table``) or Markdown (``render_md``); ``rich`` is
imported only on that path, never when the output is JSON.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

OutputFormat = Literal["json", "table", "md"]


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, list | dict | tuple) and len(value) == 0)


class WireModel(BaseModel):
    """A JSON wire object: optional empty fields are dropped, ``ALWAYS`` fields are always written."""

    # defer_build: a class's validator is built when it is first instantiated, not at import, so a
    # command builds only the result types it returns (every command module's results are importable
    # from everywhere; building them all cost a quiet `rocky tick` milliseconds it has no use for).
    model_config = ConfigDict(populate_by_name=True, defer_build=True)

    #: Fields written even when ``None`` or empty (the contract lists them as required).
    ALWAYS: ClassVar[frozenset[str]] = frozenset()

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict of this object, with contract omission rules applied recursively."""
        out: dict[str, Any] = {}
        for name, key, required in _wire_fields(type(self)):
            value = getattr(self, name)
            if not required and _is_empty(value):
                continue
            out[key] = _wire_value(value)
        return out


@cache
def _wire_fields(cls: type[WireModel]) -> tuple[tuple[str, str, bool], ...]:
    """(attribute, JSON key, always written) per field, computed once per class: a tick over 1,000
    pipelines wires ~3,000 objects, and pydantic's field metadata is slow to query per object."""
    return tuple(
        (name, field.alias or name, field.is_required() or name in cls.ALWAYS)
        for name, field in cls.model_fields.items()
    )


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _wire_value(value: Any) -> Any:
    if type(value) in _SCALARS:  # most values: nothing to convert
        return value
    if isinstance(value, WireModel):
        return value.wire()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list | tuple):
        return [_wire_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _wire_value(v) for k, v in value.items()}
    return value


class Result(WireModel):
    """A command's result: what it renders and which exit code it implies."""

    def exit_code(self) -> int:
        return 0

    def render_table(self) -> str:
        """Human-readable text; the default is the JSON document."""
        return to_json(self)

    def render_md(self) -> str:
        return self.render_table()


def to_json(result: WireModel) -> str:
    return json.dumps(result.wire(), indent=2, default=str) + "\n"


def resolve_format(requested: str | None) -> OutputFormat:
    """``--output`` wins; otherwise a table on a terminal and JSON when stdout is piped."""
    if requested in ("json", "table", "md"):
        return requested  # type: ignore[return-value]
    return "table" if sys.stdout.isatty() else "json"


def emit(result: Result, fmt: OutputFormat) -> int:
    """Write ``result`` to stdout in ``fmt`` and return its exit code."""
    if fmt == "json":
        text = to_json(result)
    elif fmt == "md":
        text = result.render_md()
        if not text.endswith("\n"):
            text += "\n"
    else:
        text = result.render_table()
        if not text.endswith("\n"):
            text += "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    return result.exit_code()


def render_rows(title: str | None, headers: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table (no rich needed; used in tests and when piped with --output table)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines: list[str] = []
    if title:
        lines.append(title)
    lines.append("  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines) + "\n"


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub/Slack-friendly Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(out) + "\n"
