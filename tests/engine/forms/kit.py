"""Helpers for the upstream config forms tests (issue 15 part B): each test writes its own project."""

from __future__ import annotations

import json
from typing import Any

from tests.fixtures.inprocess import InProcess, assert_no_traceback, rocky_in_process
from tests.fixtures.projects import DuckDBProject


def rocky(project: DuckDBProject, *args: str) -> InProcess:
    """``rocky -c <config> -o json <args>`` in this process; a refusal must be one ``error:`` line."""
    result = rocky_in_process(["-c", str(project.config), "-o", "json", *args])
    assert_no_traceback(result, " ".join(args))
    return result


def doc(result: InProcess) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed
