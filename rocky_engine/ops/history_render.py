"""How ``rocky history`` reads to a person: a table, coloured on a terminal, and Markdown for Slack.

A failed, partial or interrupted run must stand out of fifty successes. On a terminal (stdout is a TTY and
the format is ``table``) the table is drawn by ``rich`` with those rows styled; ``rich`` is imported only
then, never when the output is piped or JSON. The plain table and the Markdown say the same in words
(``Failure (interrupted)``, ``*FAILED*``), so nothing depends on colour.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rocky_engine.ops.md_text import STATUS_WORD, when
from rocky_engine.output import render_rows

#: row style per status (run statuses and model execution statuses); success rows keep the default
_STYLES = {
    "Failure": "bold red", "failed": "bold red", "error": "bold red",
    "PartialFailure": "yellow", "partial": "yellow", "skipped": "yellow",
}
_INTERRUPTED_STYLE = "bold magenta"


def status_text(status: str, interrupted: bool = False) -> str:
    """The status as the table shows it: ``Failure (interrupted)`` for a run a signal stopped."""
    return f"{status} (interrupted)" if interrupted else status


def row_style(status: str, interrupted: bool = False) -> str | None:
    """The rich style of a row: interrupted, failed and partial runs stand out; None for a success."""
    return _INTERRUPTED_STYLE if interrupted else _STYLES.get(status)


def watching() -> bool:
    """Whether a person reads stdout (a terminal): only then is the table coloured."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stdout
        return False


def table(
    title: str | None, headers: list[str], rows: list[list[str]], styles: Sequence[str | None]
) -> str:
    """The rows as a table: styled by rich on a terminal, plain aligned text otherwise."""
    if not watching():
        return render_rows(title, headers, rows)
    import io
    import shutil

    from rich import box
    from rich.console import Console
    from rich.table import Table

    grid = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header in headers:
        grid.add_column(header, no_wrap=True)
    for cells, style in zip(rows, styles, strict=True):
        grid.add_row(*cells, style=style)
    buffer = io.StringIO()
    # Never narrower than the cells: a run id cut to "run-2026…" would be useless; a wide table wraps in
    # the terminal as the plain one does. NO_COLOR and TERM=dumb are honoured by rich itself.
    natural = sum(max(len(c) for c in column) + 3 for column in zip(headers, *rows, strict=True))
    console = Console(
        file=buffer, force_terminal=True, width=max(shutil.get_terminal_size().columns, natural),
        highlight=False,
    )
    console.print(grid)
    return buffer.getvalue()


def md_title(what: str, counts: dict[str, int], note: str) -> str:
    """``*Rocky history* · 12 run(s), newest first · 2 failed, 1 interrupted · pipeline `orders```."""
    parts = [f"*Rocky history* · {what}"]
    attention = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    if attention:
        parts.append(attention)
    if note:
        parts.append(note)
    return " · ".join(parts)


def md_run_line(
    status: str, interrupted: bool, pipeline: str | None, run_id: str, started_at: str, details: list[str]
) -> str:
    """One run as a Slack bullet: failed, partial and interrupted runs lead with a bold word."""
    words = [STATUS_WORD[status]] if status in STATUS_WORD else []
    if interrupted:
        words.append("INTERRUPTED")
    lead = f"*{', '.join(words)}*" if words else status.lower()
    name = f" `{pipeline}`" if pipeline else ""
    tail = "".join(f" · {d}" for d in details if d)
    return f"- {lead}{name} `{run_id}` at {when(started_at)}{tail}"
