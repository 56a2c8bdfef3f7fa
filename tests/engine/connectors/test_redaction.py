"""A connector program that prints a multi-line secret (a PEM key) whole and line by line, and reports a
file named after one line of it: no line of the key reaches stdout (the JSON `error` included), the log
on stderr, the state file or the landing directory's leftovers, in JSON or in text output."""

from __future__ import annotations

import json

import pytest

from tests.engine.connectors.kit import ConnectorProject
from tests.engine.redact.scan import PEM, leaks


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_multi_line_secret_is_redacted_everywhere(cp: ConnectorProject, fmt: str) -> None:
    cp.setup("leak_secret", "name=PEM_KEY", secrets=["PEM_KEY"])
    done = cp.cli("--output", fmt, "load", "--connector", cp.name, env={"PEM_KEY": PEM})
    assert done.returncode == 1, done.stderr
    if fmt == "json":
        error = json.loads(done.stdout)["connector"]["error"]
        assert "${PEM_KEY}.parquet" in error, error  # the path is named, its secret line is not
    assert "${PEM_KEY}" in done.stderr  # the program's lines reached the log, redacted
    assert leaks(PEM, done.stdout, done.stderr, files=(cp.root / ".rocky-state.db", cp.landing)) == []
