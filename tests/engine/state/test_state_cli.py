"""``rocky state`` (watermarks) end to end: a real state file, the real CLI in a subprocess."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rocky_engine import __version__
from rocky_engine.state import SCHEMA_VERSION, StateStore
from tests.fixtures.projects import Cli, run_rocky

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def rocky(cwd: Path, *args: str) -> Cli:
    return run_rocky(args, cwd=cwd)


def doc(proc: Cli) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    parsed: dict[str, Any] = json.loads(proc.stdout)
    return parsed


def test_empty_project_lists_no_watermarks(tmp_path: Path) -> None:
    assert doc(rocky(tmp_path, "state")) == {
        "version": __version__, "command": "state", "schema_version_supported": SCHEMA_VERSION,
        "watermarks": [],
    }
    assert not (tmp_path / ".rocky-state.db").exists()


def test_lists_watermarks_with_and_without_the_action(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / ".rocky-state.db") as store:
        store.watermarks.set_many({"poc.raw.orders": "2026-02-28 23:59:59", "poc.raw.accounts": "17"}, now=T0)
    expected = [
        # table / last_value: the published names (last_value a UTC timestamp when the value is one)
        {"key": "poc.raw.accounts", "table": "poc.raw.accounts", "value": "17", "last_value": "17",
         "updated_at": "2026-03-01T08:00:00.000Z"},
        {"key": "poc.raw.orders", "table": "poc.raw.orders", "value": "2026-02-28 23:59:59",
         "last_value": "2026-02-28T23:59:59Z", "updated_at": "2026-03-01T08:00:00.000Z"},
    ]
    assert doc(rocky(tmp_path, "state"))["watermarks"] == expected
    assert doc(rocky(tmp_path, "state", "watermarks", "--output", "json"))["watermarks"] == expected
    table = rocky(tmp_path, "state", "-o", "table")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["TABLE", "WATERMARK", "UPDATED"]
    assert "poc.raw.orders" in table.stdout


def test_reads_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with StateStore.open(path) as store:
        store.watermarks.set("a.b.c", "1")
        result = doc(rocky(tmp_path, "--state-path", "s.db", "state"))
    assert [w["key"] for w in result["watermarks"]] == ["a.b.c"]


def test_newer_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    StateStore.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE metadata SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    proc = rocky(tmp_path, "state", "--state-path", "s.db")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"error: state store at {path} has schema version 999")


def test_unknown_action_is_a_usage_error(tmp_path: Path) -> None:
    proc = rocky(tmp_path, "state", "nope")
    assert proc.returncode == 1
    assert "invalid choice: 'nope'" in proc.stderr
