"""A progress display on stderr while a run with more than a few tasks executes.

``rich`` is imported only when a person is watching (stderr is a terminal); otherwise progress is
silent and the log carries per-task failures.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

_MIN_TASKS = 5


class RunProgress:
    """Counts finished tasks; draws a bar when stderr is a terminal."""

    def __init__(self, total: int, label: str, *, enabled: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self._lock = threading.Lock()
        show = sys.stderr.isatty() if enabled is None else enabled
        self._bar: Any = None
        self._task: Any = None
        if show and total > _MIN_TASKS:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task(label, total=total, failed=0)
            self._bar.start()

    def advance(self, ok: bool) -> None:
        with self._lock:
            self.done += 1
            if not ok:
                self.failed += 1
            if self._bar is not None:
                self._bar.update(self._task, advance=1, failed=self.failed)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
