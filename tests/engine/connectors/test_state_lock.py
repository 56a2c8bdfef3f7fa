"""A `rocky run` that holds the state writer for its whole run, overlapping a `rocky load --connector`:
the load fails before the promote with a JSON document naming the other writer (never exit 1 with nothing
on stdout, never the rows in the target with the state unmoved), frees its claim, and the next load
loads the batch once."""

from __future__ import annotations

import json
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.engine.connectors.kit import ConnectorProject
from tests.fixtures.processes import wait_for
from tests.fixtures.projects import popen_rocky

BUSY_RUN = """
[adapter.other]
type = "duckdb"
path = "other.duckdb"

[pipeline.busy]
type = "transformation"
models = "busy_models/**"
target = {{ adapter = "other" }}

[[hook.on_pipeline_start]]
command = "touch {ready}; while [ ! -f {release} ]; do sleep 0.02; done"
"""


def _busy_run(cp: ConnectorProject) -> subprocess.Popen[str]:
    """A real `rocky run` that holds the state writer until the file `release` exists."""
    ready, release = _handshake(cp)
    ready.unlink(missing_ok=True)
    release.unlink(missing_ok=True)
    run = popen_rocky(["-c", str(cp.config), "--output", "json", "run", "--pipeline", "busy"], cwd=cp.root)
    wait_for(ready.exists, what="rocky run to hold the state writer")
    return run


def _handshake(cp: ConnectorProject) -> tuple[Path, Path]:
    """The file the busy run's hook creates once it holds the writer, and the one that lets it go on."""
    return cp.root / "ready", cp.root / "release"


def _finish(cp: ConnectorProject, run: subprocess.Popen[str]) -> None:
    _handshake(cp)[1].touch()
    run.wait(timeout=60)
    assert run.returncode == 0, run.stderr.read() if run.stderr else ""


@pytest.fixture
def busy(cp: ConnectorProject) -> ConnectorProject:
    (cp.root / "busy_models").mkdir()
    (cp.root / "busy_models" / "one.sql").write_text("SELECT 1 AS x\n")
    return cp


def _extra(cp: ConnectorProject) -> str:
    ready, release = _handshake(cp)
    return "state_lock_wait_secs = 0\n" + textwrap.dedent(BUSY_RUN.format(ready=ready, release=release))


def _assert_names_the_run(error: str, run: subprocess.Popen[str]) -> None:
    assert f"pid {run.pid} on {socket.gethostname()} (rocky run busy), since 20" in error, error
    assert "\n" not in error


def test_a_load_overlapping_rocky_run_fails_before_the_promote_and_the_next_load_loads_once(
    busy: ConnectorProject,
) -> None:
    cp = busy
    go = cp.root / "go"
    cp.setup("wait_then_ok", f"marker={cp.marker}", f"go={go}", extra=_extra(cp))

    # the load claims and runs its program; rocky run takes the writer meanwhile and holds it past the
    # program's end: the load fails before the promote (no row in the target, the state unchanged)
    load = cp.popen()
    wait_for(cp.marker.exists, what="the program to start")
    run = _busy_run(cp)
    try:
        go.touch()
        out, err = load.communicate(timeout=60)
        # a load that starts while rocky run holds the writer is refused at the claim, with a document
        refused = cp.load_in_process()
    finally:
        _finish(cp, run)
    assert load.returncode == 1, err
    doc = json.loads(out)["connector"]
    assert doc["status"] == "failed", doc
    _assert_names_the_run(doc["error"], run)
    assert doc["error"].startswith("state store at ") and "unchanged" in doc["error"]
    assert "events" not in cp.relations() or cp.count() == 0
    assert cp.state_path.exists() and cp.state() is None

    assert refused.exit_code() == 1 and refused.connector.status == "failed"
    assert refused.connector.attempts == 0
    _assert_names_the_run(refused.connector.error, run)
    assert "nothing was claimed or run" in refused.connector.error

    # 3. the next load runs the same batch at once (its claim was freed), and loads it once
    third = cp.load_in_process()
    assert third.exit_code() == 0 and third.connector.status == "loaded", third.connector.error
    assert cp.rows("SELECT count(*), count(DISTINCT id) FROM wh.raw.events") == [(3, 3)]
    state = cp.state()
    assert state is not None and state["commit_seq"] == 1
