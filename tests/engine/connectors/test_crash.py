"""``kill -9`` of ``rocky`` before the promote, between the promote and the state commit, and after the
commit: at least once, never lost (seeds/child-connectors.md "What Rocky guarantees")."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import threading
from datetime import UTC, datetime, timedelta

import pytest

from rocky_engine.state.store import StateStore
from tests.engine.connectors.kit import ConnectorProject
from tests.fixtures.processes import pid_alive, wait_for


class Watched:
    """A running ``rocky load`` whose stderr is collected line by line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def finish(self, timeout: float = 60) -> str:
        """Wait for the end; returns stdout (stderr stays with the reader thread)."""
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return out

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=5)


def later(hours: float) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


def test_kill_before_the_promote_loads_nothing_and_the_batch_runs_again(cp: ConnectorProject) -> None:
    cp.setup("wait_then_ok", f"marker={cp.marker}", f"go={cp.root / 'go'}")
    run = Watched(cp.popen())
    wait_for(cp.marker.exists, what="the program to start")
    program = int(cp.marker.read_text())
    run.kill9()
    wait_for(lambda: not pid_alive(program), timeout=10, what="the program to die with rocky")
    assert not (cp.root / "wh.duckdb").exists() and cp.state() is None
    assert cp.claims()["connector:fake:0"]["state"] == "in_flight"  # nobody freed it
    # until the claim expires a new run skips
    (cp.root / "go").touch()
    res = cp.load()
    assert res.returncode == 0 and res.connector["status"] == "skipped"
    # after it expires, the next run adopts it and loads the batch (once: nothing was promoted)
    out = cp.load_in_process(clock=lambda: later(3))
    assert out.connector.status == "loaded" and out.connector.adopted_expired_claim is True
    assert cp.count() == 3
    state = cp.state()
    assert state is not None and state["commit_seq"] == 1


def test_kill_between_promote_and_commit_loads_the_batch_twice_never_loses_it(cp: ConnectorProject) -> None:
    cp.setup("wait_then_ok", f"marker={cp.marker}", f"go={cp.root / 'go'}")
    run = Watched(cp.popen())
    wait_for(cp.marker.exists, what="the program to start")
    # rocky holds the state writer from before the promote through the commit, so no other writer can
    # come between them; to stop it there, hold SQLite's write lock on the state file: the commit then
    # waits (busy_timeout, 5 s) after the promote, and rocky is killed in that window.
    blocker = sqlite3.connect(cp.state_path, timeout=0)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        (cp.root / "go").touch()
        wait_for(lambda: run.saw("committing the state"), what="rocky to promote and start the commit")
        run.kill9()
        assert cp.count() == 3  # promoted: the rows are in the table
    finally:
        blocker.rollback()
        blocker.close()
    assert cp.state() is None  # ... but the state did not move
    assert cp.claims()["connector:fake:0"]["state"] == "in_flight"
    res = cp.load()
    assert res.returncode == 0 and res.connector["status"] == "skipped"
    assert cp.count() == 3
    out = cp.load_in_process(clock=lambda: later(3))
    assert out.connector.status == "loaded"
    assert out.connector.adopted_expired_claim is True
    assert out.connector.commit_seq_before == 0 and out.connector.commit_seq_after == 1
    assert cp.count() == 6  # the batch landed twice: at least once
    assert cp.rows("SELECT count(DISTINCT id) FROM wh.raw.events") == [(3,)]
    assert out.exit_code() == 0


@pytest.mark.slow
def test_kill_after_the_commit_loses_nothing_and_loads_nothing_twice(cp: ConnectorProject) -> None:
    cp.setup("ok")
    run = Watched(cp.popen())
    wait_for(lambda: run.saw("commit_seq 0 -> 1") or run.proc.poll() is not None, what="the commit")
    run.kill9()
    state = cp.state()
    assert state is not None and state["commit_seq"] == 1
    assert cp.claims()["connector:fake:0"]["state"] == "succeeded"
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert res.connector["commit_seq_before"] == 1 and res.connector["commit_seq_after"] == 2
    assert res.connector["adopted_expired_claim"] is False
    assert cp.rows("SELECT count(*), count(DISTINCT id) FROM wh.raw.events") == [(6, 6)]


def test_commit_fence_refuses_a_moved_commit_seq(cp: ConnectorProject) -> None:
    cp.setup("wait_then_ok", f"marker={cp.marker}", f"go={cp.root / 'go'}")
    run = Watched(cp.popen())
    wait_for(cp.marker.exists, what="the program to start")
    # something else commits this connector's state while the run is in flight
    with StateStore.open(cp.state_path, writer=True) as store, store.transaction() as conn:
        conn.execute("INSERT INTO connector_state (name, commit_seq, schema_version, value, committed_at) "
                     "VALUES ('fake', 5, 1, '{\"cursor\": 0}', '2026-01-01T00:00:00.000000Z')")
    (cp.root / "go").touch()
    out = run.finish()
    assert run.proc.returncode == 1
    doc = json.loads(out)
    error = doc["connector"]["error"]
    assert "commit_seq moved from 0 to 5 since this run claimed its batch; the state commit is refused" \
        in error
    assert doc["files_loaded"] == 1  # the rows are in the table
    assert cp.claims()["connector:fake:0"]["state"] == "in_flight"
    assert len(cp.scratch_dirs()) == 1  # kept: the child succeeded, the run failed afterwards


def test_a_second_run_skips_while_the_first_is_in_flight(cp: ConnectorProject) -> None:
    cp.setup("wait_then_ok", f"marker={cp.marker}", f"go={cp.root / 'go'}")
    first = Watched(cp.popen())
    wait_for(cp.marker.exists, what="the program to start")
    # the first run holds the claim but not the state store's lock: the second meets the claim
    second = cp.load()
    assert second.returncode == 0, second.stderr
    assert second.connector["status"] == "skipped"
    (cp.root / "go").touch()
    out = first.finish()
    assert first.proc.returncode == 0
    assert json.loads(out)["connector"]["status"] == "loaded"
    assert cp.count() == 3
