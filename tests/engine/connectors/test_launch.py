"""Stopping programs: wall time, the output watchdog, SIGTERM then SIGKILL, and children left behind."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from rocky_engine.connectors import launch
from rocky_engine.connectors.launch import KILL_GRACE_SECS, LaunchSpec, Redactor, program_env, run_program
from rocky_engine.connectors.limits import EffectiveLimits
from tests.engine.connectors.kit import ConnectorProject
from tests.engine.process.kit import dead, wait_for_file
from tests.fixtures.processes import pid_alive


def spec(tmp_path: Path, command: str, wall_time_secs: int = 600) -> LaunchSpec:
    scratch = tmp_path / "s"
    scratch.mkdir()
    return LaunchSpec(
        argv=["/bin/sh", "-c", command],
        scratch=scratch,
        env=program_env({"PATH": "/usr/bin:/bin"}, {}, "r" * 32, scratch),
        request=b"{}\n",
        limits=EffectiveLimits(wall_time_secs=wall_time_secs),
        redact=Redactor({}),
        label="t",
    )


def test_wall_time_stops_the_program(cp: ConnectorProject) -> None:
    # 3 s, not 1: the program must get as far as writing its marker first, and a cold Python start on a
    # loaded 2-core machine once took longer than 1 s (the marker was never written).
    cp.setup("sleep", f"marker={cp.marker}", extra="[connector.fake.limits]\nwall_time_secs = 3\n")
    res = cp.load()
    assert res.returncode == 1
    assert res.connector["error"] == ("all 1 attempt(s) failed; the last one: the program ran past its wall "
                                      "time of 3 s and was stopped")
    assert "stopping the program (wall time)" in res.stderr
    assert not pid_alive(int(cp.marker.read_text()))
    assert cp.scratch_dirs() == []


def test_sigterm_is_enough_for_a_program_that_honours_it(tmp_path: Path) -> None:
    outcome = run_program(spec(tmp_path, "exec sleep 300", wall_time_secs=1), threading.Event())
    assert outcome.stopped == "wall_time"
    assert outcome.returncode == -signal.SIGTERM  # it died of the SIGTERM: no SIGKILL 5 s later


def test_manifest_wall_time_applies_when_smaller(cp: ConnectorProject) -> None:
    cp.setup("sleep", manifest_extra="[limits]\nwall_time_secs = 1\n",
             extra="[connector.fake.limits]\nwall_time_secs = 100\n")
    res = cp.load()
    assert "wall time of 1 s" in res.connector["error"]


@pytest.mark.slow
def test_program_ignoring_sigterm_is_killed_five_seconds_later(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    stop = threading.Event()
    # the stop comes after the program trapped SIGTERM (its handshake), so the grace is all that is timed
    threading.Thread(target=lambda: (wait_for_file(ready), stop.set()), daemon=True).start()
    t0 = time.monotonic()
    outcome = run_program(spec(tmp_path, f"trap '' TERM; echo ok > {ready}; sleep 300 & wait"), stop)
    assert outcome.stopped == "interrupted"
    assert outcome.returncode == -signal.SIGKILL
    assert time.monotonic() - t0 >= KILL_GRACE_SECS  # SIGKILL no sooner than the 5 s grace


@pytest.mark.slow
def test_output_watchdog_stops_a_program_writing_too_much(cp: ConnectorProject) -> None:
    cp.setup("fill", extra="[connector.fake.limits]\noutput_bytes = 1000000\n")
    res = cp.load()
    assert res.returncode == 1
    assert res.connector["error"].endswith("wrote more than output_bytes (1000000 bytes) and was stopped")
    assert cp.scratch_dirs() == []


@pytest.mark.slow
def test_children_that_outlive_the_program_are_stopped(cp: ConnectorProject) -> None:
    cp.setup("orphan", f"marker={cp.marker}")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert "the program exited but left processes running; they were stopped" in res.stderr
    assert dead(int(cp.marker.read_text()))  # already when the attempt ended, not some time later
    assert cp.count() == 3


def test_program_that_cannot_start(cp: ConnectorProject) -> None:
    cp.setup("ok")
    prog = cp.root / "conn" / "prog.py"
    prog.write_text("#!/no/such/interpreter\n")
    res = cp.load()
    assert res.returncode == 1
    assert "the program could not be started" in res.connector["error"]


def test_stop_event_stops_the_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The claim is "SIGTERM was enough": give the group a grace no loaded machine runs out of (the 5 s
    # default ran out once under load, and the SIGKILL then made this test fail for the wrong reason).
    monkeypatch.setattr(launch, "KILL_GRACE_SECS", 120.0)
    ready = tmp_path / "ready"
    stop = threading.Event()
    threading.Thread(target=lambda: (wait_for_file(ready), stop.set()), daemon=True).start()
    outcome = run_program(spec(tmp_path, f"sleep 300 & echo ok > {ready}; sleep 300"), stop)
    assert outcome.stopped == "interrupted"
    limits = EffectiveLimits(wall_time_secs=600)
    assert outcome.describe(limits) == "rocky was interrupted; the program was stopped"
    assert outcome.returncode == -signal.SIGTERM  # the group's SIGTERM ended it; no SIGKILL was needed


def test_redactor() -> None:
    redact = Redactor({"A": "abcdefgh", "B": "abcdefghijkl", "C": "short"})
    assert redact("x abcdefghijkl y abcdefgh short") == "x ${B} y ${A} short"
    assert redact.longest == 12


def test_program_env_is_cleared(tmp_path: Path) -> None:
    env = program_env({"PATH": "/p", "LANG": "de_DE.UTF-8", "AWS_ACCESS_KEY_ID": "x", "HOME": "/root"},
                      {"TOKEN": "t"}, "rid", tmp_path)
    assert env == {"PATH": "/p", "LANG": "de_DE.UTF-8", "TOKEN": "t", "ROCKY_RUN_ID": "rid",
                   "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    assert "LANG" not in program_env({"PATH": "/p"}, {}, "rid", tmp_path)
