"""How a run ended, seen three ways: the exit code, the JSON document on stdout and the run record.

Operators trust all three (seeds: "trust the exit code, the JSON result and rocky history"); an
:class:`Ending` gathers them for one run and :func:`assert_one_story` holds them to each other and to
CONTRACT section 3 (Success 0, PartialFailure 2, Failure 1, interrupted 130 and never a Success).
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocky_engine.state.runs import RunRecord
from rocky_engine.state.store import StateStore
from tests.engine.process.kit import wait_for_hook
from tests.engine.schedule.kit import transformation, write_project
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import popen_rocky

#: the exit code each recorded status stands for when no signal stopped the run
EXIT_OF_STATUS = {"Success": 0, "PartialFailure": 2, "Failure": 1}


@dataclass(frozen=True)
class Ending:
    """One run's exit code, its document and its run record (None: the run left none)."""

    code: int
    doc: dict[str, Any]
    record: RunRecord | None
    stderr: str


def project(root: Path, models: dict[str, str], extra: str = "", name: str = "orders") -> Path:
    """A DuckDB transformation project ``name`` over ``models`` (``extra``: more rocky.toml); its config."""
    return write_project(root, transformation(name) + extra, models)


def store_of(config: Path) -> Path:
    return config.parent / "models" / ".rocky-state.db"


def records(config: Path) -> list[RunRecord]:
    """Every run record of the project, newest first."""
    with StateStore.open(store_of(config), writer=False) as store:
        return store.runs.list(limit=None)


def record_of(config: Path, run_id: str | None) -> RunRecord | None:
    return next((r for r in records(config) if r.run_id == run_id), None)


def ending_in_process(config: Path, *args: str) -> Ending:
    """``rocky run --output json`` in this process (the CLI's own code path, exit-code mapping included)."""
    res = rocky_in_process(["-c", str(config), "run", "--output", "json", *args])
    doc: dict[str, Any] = json.loads(res.stdout) if res.stdout.strip() else {}
    return Ending(res.returncode, doc, record_of(config, doc.get("run_id")), res.stderr)


def ending_of_signal(config: Path, pids: Path, sig: signal.Signals) -> Ending:
    """A real ``rocky run``: wait until its sleeping hook runs (the handshake), send ``sig``."""
    proc = popen_rocky(["-c", str(config), "run", "--output", "json"], cwd=config.parent)
    try:
        wait_for_hook(pids)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc: dict[str, Any] = json.loads(stdout) if stdout.strip() else {}
    return Ending(proc.returncode, doc, record_of(config, doc.get("run_id")), stderr)


def ending_of_child(config: Path, code: int, submission_id: str, stdout: Path) -> Ending:
    """A run the scheduler or the server started: its exit code, the document it wrote to ``stdout`` and
    the record its submission left."""
    text = stdout.read_text()
    doc: dict[str, Any] = json.loads(text) if text.strip() else {}
    record = next((r for r in records(config) if r.submission_id == submission_id), None)
    return Ending(code, doc, record, "")


def assert_one_story(
    end: Ending, status: str, *, interrupted: bool = False, error: str | None = None
) -> None:
    """Exit code, document and run record agree with each other and with CONTRACT section 3."""
    context = f"exit {end.code}\n--- document\n{json.dumps(end.doc)[:3000]}\n--- stderr\n{end.stderr[-3000:]}"
    expected_code = 130 if interrupted else EXIT_OF_STATUS[status]
    assert end.code == expected_code, context
    assert not (interrupted and status == "Success"), "an interrupted run is never a Success"
    record = end.record
    assert record is not None, f"no run record\n{context}"
    said = (record.status, record.exit_code, record.interrupted)
    assert said == (status, expected_code, interrupted), f"run record says {said}\n{context}"
    if end.doc:
        assert end.doc["status"] == status, context
        assert end.doc["interrupted"] is interrupted, context
        assert end.doc["run_id"] == record.run_id, context
    if error is not None:
        recorded = [e["error"] for e in record.extra.get("errors", [])]
        assert any(error in e for e in recorded), f"{error!r} not in the record's errors {recorded}"
        if end.doc:
            assert any(error in e["error"] for e in end.doc["errors"]), context


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound once, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sqlite(path: Path, *statements: str) -> None:
    """Run statements against a SQLite file with the sqlite3 CLI-free stdlib module (the store is closed)."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


__all__ = [
    "Ending", "assert_one_story", "closed_port", "ending_in_process", "ending_of_child", "ending_of_signal",
    "project", "record_of", "records", "sqlite", "store_of",
]
