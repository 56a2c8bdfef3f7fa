"""``rocky serve --scheduler`` drained while a scheduled run's command hook is still running: the hook is
stopped with its run, so no process of it is left when the server exits."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.engine.process.kit import child_sessions, descendants, sleeping_hook, survivors, wait_for_hook
from tests.engine.server.kit import runs_in_store, serving, simple_project

pytestmark = pytest.mark.slow


def test_a_drained_server_leaves_no_hook_process_behind(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    simple_project(tmp_path, hook=sleeping_hook(pids))
    # the kill grace is long on purpose: the run must end because its hook was stopped, not by SIGKILL
    args = ("--scheduler", "--poll-interval-seconds", "0.2", "--drain-timeout-seconds", "1",
            "--kill-grace-seconds", "120")
    with serving(tmp_path, *args) as srv, srv.client() as c:
        assert c.post("/api/v1/hooks/trigger/orders", content=b"{}").status_code == 202
        sh, sleep = wait_for_hook(pids)
        assert srv.proc is not None
        tree = descendants(srv.proc.pid)
        assert {sh, sleep} <= {p.pid for p in tree}
        t0 = time.monotonic()
        srv.signal(signal.SIGTERM)
        assert srv.wait(90) == 0
        waited = time.monotonic() - t0
        doc = srv.output()
        # looked at the moment the server is gone, not after a wait
        left = survivors(tree, child_sessions(tree))
    assert left == [], f"still alive after the server exited: {left}"
    assert doc["child_terminated"] is True
    # the drained run recorded itself as what it was: stopped before anything landed (issue 13)
    [record] = runs_in_store(tmp_path / "rocky.toml")
    assert (record.status, record.interrupted, record.exit_code) == ("Failure", True, 130)
    assert waited < 60  # neither the hook's 300 s nor the 120 s kill grace
