"""One place that renders command results and maps them to exit codes.

Every command returns a :class:`Result`: its wire document (``rocky_engine.wire``) plus its exit code and
rendering. JSON goes to stdout as one document with a 2-space indent and a trailing newline; optional
fields that are empty are omitted (CONTRACT section 0, ``rocky_engine.wire.base``).
Every document and text leaves with the project's secrets replaced by ``${NAME}`` (rocky_engine/redact.py).
For people, a result renders itself as a table (``render_table``) or Markdown (``render_md``); ``rich`` is
imported only on that path, never when the output is JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from rocky_engine.redact import known, redact
from rocky_engine.wire.base import WireModel, document_text

OutputFormat = Literal["json", "table", "md"]


class Result:
    """What a command returns: a wire document (``rocky_engine.wire``) that also knows its exit code and
    how to render itself for people.

    A mixin, combined with the document's wire model: ``class RunOutput(RunResult, Result)``. The wire
    model owns every field (the engine adds none, ``tests/engine/wire`` checks it); this side owns what is
    not wire: the exit code and the table / Markdown text.
    """

    if TYPE_CHECKING:

        def wire(self) -> dict[str, Any]: ...

    def exit_code(self) -> int:
        return 0

    def render_table(self) -> str:
        """Human-readable text; the default is the JSON document."""
        return document_text(self.wire())

    def render_md(self) -> str:
        return self.render_table()


def to_json(result: WireModel | Result) -> str:
    return document_text(known().deep(result.wire()))


def redacted_document_text(doc: WireModel | Mapping[str, Any]) -> str:
    """:func:`document_text` of ``doc`` with every secret the process knows redacted (server responses,
    incident bundles). The strings are redacted, not the JSON text, so no escape sequence is cut."""
    secrets = known()
    if not secrets:
        return document_text(doc)
    data = doc.wire() if isinstance(doc, WireModel) else json.loads(document_text(doc))
    return document_text(secrets.deep(data))


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
    if fmt != "json":
        text = redact(text)
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
