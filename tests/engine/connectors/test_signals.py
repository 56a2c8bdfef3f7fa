"""Ctrl-C / SIGTERM during the program, during staging, and after the promote (the seed's "Known gaps")."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tests.engine.connectors.kit import ConnectorProject
from tests.fixtures.processes import pid_alive, wait_for


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_while_the_program_runs(cp: ConnectorProject, sig: signal.Signals) -> None:
    cp.setup("sleep", f"marker={cp.marker}")
    proc = cp.popen()
    wait_for(cp.marker.exists, what="the program to start")
    program = int(cp.marker.read_text())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["status"] == "Failure"
    assert doc["connector"]["status"] == "failed"
    assert doc["connector"]["error"] == "interrupted while the program ran (attempt 1); the claim was freed"
    assert not pid_alive(program)
    assert cp.claims()["connector:fake:0"]["state"] == "failed"
    assert cp.state() is None and cp.scratch_dirs() == []


def test_no_retry_after_an_interrupt(cp: ConnectorProject) -> None:
    cp.setup("sleep", f"marker={cp.marker}", retries=3)
    proc = cp.popen()
    wait_for(cp.marker.exists, what="the program to start")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert json.loads(out)["connector"]["attempts"] == 1


def _signal_on_call(n: int) -> Callable[[], datetime]:
    calls = {"n": 0}

    def clock() -> datetime:
        calls["n"] += 1
        if calls["n"] == n:
            os.kill(os.getpid(), signal.SIGTERM)
        return datetime.now(UTC)

    return clock


def test_signal_while_staging_stops_before_the_promote(cp: ConnectorProject) -> None:
    cp.setup("ok")
    # clock calls: 1 = the claim, 2 = the claim's expiry check after staging (before the promote)
    out = cp.load_in_process(clock=_signal_on_call(2))
    assert out.interrupted is True and out.exit_code() == 130
    assert out.connector.status == "failed"
    assert out.connector.error.startswith("interrupted while staging the batch; stopped before the promote")
    assert cp.relations() == ["events"]  # the empty target was created, the staging view dropped
    assert cp.count() == 0
    assert cp.state() is None
    assert cp.claims()["connector:fake:0"]["state"] == "failed"
    assert out.files_failed == 1 and out.files_loaded == 0


def test_signal_after_the_promote_lets_the_commit_finish(cp: ConnectorProject) -> None:
    cp.setup("ok")
    # clock call 3 is the state commit, after the promote was sent
    out = cp.load_in_process(clock=_signal_on_call(3))
    assert out.connector.status == "loaded"
    assert out.interrupted is True and out.exit_code() == 130
    assert cp.count() == 3
    state = cp.state()
    assert state is not None and state["commit_seq"] == 1
    assert cp.claims()["connector:fake:0"]["state"] == "succeeded"


def test_claim_expired_before_the_promote_is_a_failure_before_the_promote(cp: ConnectorProject) -> None:
    from datetime import timedelta

    cp.setup("ok")
    calls = {"n": 0}

    def clock() -> datetime:
        calls["n"] += 1
        return datetime.now(UTC) + (timedelta(hours=10) if calls["n"] >= 2 else timedelta())

    out = cp.load_in_process(clock=clock)
    assert out.connector.status == "failed"
    assert "the claim connector:fake:0 expired before the promote" in out.connector.error
    assert cp.count() == 0 and cp.state() is None
    assert cp.claims()["connector:fake:0"]["state"] == "failed"
