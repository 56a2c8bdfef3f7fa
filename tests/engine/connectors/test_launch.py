"""Stopping programs: wall time, the output watchdog, SIGTERM then SIGKILL, and children left behind."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rocky_engine.connectors.launch import LaunchSpec, Redactor, program_env, run_program
from rocky_engine.connectors.limits import EffectiveLimits
from tests.engine.connectors.kit import ConnectorProject
from tests.fixtures.processes import pid_alive


def test_wall_time_stops_the_program(cp: ConnectorProject) -> None:
    cp.setup("sleep", f"marker={cp.marker}", extra="[connector.fake.limits]\nwall_time_secs = 1\n")
    t0 = time.monotonic()
    res = cp.load()
    elapsed = time.monotonic() - t0
    assert res.returncode == 1
    assert res.connector["error"] == ("all 1 attempt(s) failed; the last one: the program ran past its wall "
                                      "time of 1 s and was stopped")
    assert elapsed < 5.0  # SIGTERM was enough: no 5 s wait for SIGKILL
    assert not pid_alive(int(cp.marker.read_text()))
    assert cp.scratch_dirs() == []


def test_manifest_wall_time_applies_when_smaller(cp: ConnectorProject) -> None:
    cp.setup("sleep", manifest_extra="[limits]\nwall_time_secs = 1\n",
             extra="[connector.fake.limits]\nwall_time_secs = 100\n")
    res = cp.load()
    assert "wall time of 1 s" in res.connector["error"]


@pytest.mark.slow
def test_program_ignoring_sigterm_is_killed_five_seconds_later(cp: ConnectorProject) -> None:
    cp.setup("ignore_sigterm", f"marker={cp.marker}", extra="[connector.fake.limits]\nwall_time_secs = 1\n")
    t0 = time.monotonic()
    res = cp.load()
    elapsed = time.monotonic() - t0
    assert res.returncode == 1
    assert "ran past its wall time of 1 s" in res.connector["error"]
    assert 5.5 <= elapsed < 15, elapsed
    assert not pid_alive(int(cp.marker.read_text()))


@pytest.mark.slow
def test_output_watchdog_stops_a_program_writing_too_much(cp: ConnectorProject) -> None:
    cp.setup("fill", extra="[connector.fake.limits]\noutput_bytes = 1000000\n")
    t0 = time.monotonic()
    res = cp.load()
    assert res.returncode == 1
    assert res.connector["error"].endswith("wrote more than output_bytes (1000000 bytes) and was stopped")
    assert time.monotonic() - t0 < 15
    assert cp.scratch_dirs() == []


@pytest.mark.slow
def test_children_that_outlive_the_program_are_stopped(cp: ConnectorProject) -> None:
    cp.setup("orphan", f"marker={cp.marker}")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert "left processes of its group running; stopping them" in res.stderr
    orphan = int(cp.marker.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(orphan)
    assert cp.count() == 3


def test_program_that_cannot_start(cp: ConnectorProject) -> None:
    cp.setup("ok")
    prog = cp.root / "conn" / "prog.py"
    prog.write_text("#!/no/such/interpreter\n")
    res = cp.load()
    assert res.returncode == 1
    assert "the program could not be started" in res.connector["error"]


def test_stop_event_stops_the_group(tmp_path: Path) -> None:
    scratch = tmp_path / "s"
    scratch.mkdir()
    spec = LaunchSpec(
        argv=["/bin/sh", "-c", "sleep 300 & sleep 300"],
        scratch=scratch,
        env=program_env({"PATH": "/usr/bin:/bin"}, {}, "r" * 32, scratch),
        request=b"{}\n",
        limits=EffectiveLimits(wall_time_secs=600),
        redact=Redactor({}),
        label="t",
    )
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    outcome = run_program(spec, stop)
    assert outcome.stopped == "interrupted"
    assert outcome.describe(spec.limits) == "rocky was interrupted; the program was stopped"
    assert outcome.duration_secs < 5


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
