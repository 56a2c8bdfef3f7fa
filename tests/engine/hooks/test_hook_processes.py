"""A command hook is a child of its run: ``kill -9`` of ``rocky run`` takes it down within 2 s, and SIGTERM
to ``rocky run`` stops it, so the run ends in about the hook's grace instead of the hook's duration."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from rocky_engine.hooks.commands import KILL_GRACE_SECS
from tests.engine.hooks.kit import make_project
from tests.engine.process.kit import (
    child_sessions,
    dead,
    descendants,
    sleeping_hook,
    wait_for_hook,
    wait_gone,
)
from tests.fixtures.projects import popen_rocky


@pytest.mark.slow
def test_kill_9_of_rocky_run_takes_its_running_hook_down(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    config = make_project(tmp_path, extra_toml=sleeping_hook(pids))
    rocky = popen_rocky(["-c", str(config), "--output", "json", "run"], cwd=tmp_path)
    try:
        sh, sleep = wait_for_hook(pids)
        tree = descendants(rocky.pid)
        assert {sh, sleep} <= {p.pid for p in tree}
        rocky.kill()
        rocky.wait()
        left = wait_gone(tree, child_sessions(tree), deadline=time.monotonic() + 2.0)
        assert left == [], f"alive 2 s after rocky run was killed: {left}"
    finally:
        if rocky.poll() is None:
            rocky.kill()
            rocky.wait()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_rocky_run_stops_its_hook(tmp_path: Path, sig: signal.Signals) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    config = make_project(tmp_path, extra_toml=sleeping_hook(pids))
    rocky = popen_rocky(["-c", str(config), "--output", "json", "run"], cwd=tmp_path)
    sh, sleep = wait_for_hook(pids)
    t0 = time.monotonic()
    rocky.send_signal(sig)
    out, err = rocky.communicate(timeout=120)
    assert rocky.returncode == 130, err
    assert json.loads(out)["interrupted"] is True
    assert time.monotonic() - t0 < 60  # the hook would have slept 300 s
    assert dead(sh) and dead(sleep)  # gone before rocky exited
    assert "was stopped: the run was interrupted" in err


@pytest.mark.slow
def test_a_hook_that_ignores_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    hook = sleeping_hook(pids).replace("command = '", "command = 'trap \"\" TERM; ")
    config = make_project(tmp_path, extra_toml=hook)
    rocky = popen_rocky(["-c", str(config), "--output", "json", "run"], cwd=tmp_path)
    sh, sleep = wait_for_hook(pids)
    t0 = time.monotonic()
    rocky.send_signal(signal.SIGTERM)
    _, err = rocky.communicate(timeout=120)
    assert rocky.returncode == 130, err
    assert time.monotonic() - t0 >= KILL_GRACE_SECS  # SIGTERM was ignored: SIGKILL after the grace
    assert dead(sh) and dead(sleep)
