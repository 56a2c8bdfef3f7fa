"""``rocky tick`` stopped by SIGTERM or SIGINT while its child runs (issue 13 item 3), real processes.

A stopped tick is a shutdown, not a failed pipeline: it stops its child through the launcher (the child
records its run as interrupted), writes no incident bundle, leaves the failure streak and the backoff
alone (the demand is due again at the next tick), prints its document with ``interrupted: true`` and
exits 130. The child's hook (a shell and its ``sleep``) is gone when the tick has exited.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.engine.outcomes.kit import assert_one_story, ending_of_child, project, store_of
from tests.engine.process.kit import dead, sleeping_hook, wait_for_hook
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import popen_rocky

pytestmark = pytest.mark.slow

FRESH = '\n[pipeline.orders.schedule]\nfreshness = true\n\n[freshness]\nexpected_lag_seconds = 3600\n'


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stopped_tick_is_an_interruption_not_a_failure(tmp_path: Path, sig: signal.Signals) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    config = project(tmp_path / "p", {"good.sql": "select 1 as x\n"}, FRESH + sleeping_hook(pids))
    tick = popen_rocky(["-c", str(config), "tick", "--output", "json"], cwd=config.parent)
    try:
        sh, sleep = wait_for_hook(pids)  # the child `rocky run` is in its pipeline_start hook
        tick.send_signal(sig)
        stdout, stderr = tick.communicate(timeout=60)
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.wait()
    assert dead(sh) and dead(sleep), "the child's hook outlived the tick"
    assert tick.returncode == 130, stderr
    doc = json.loads(stdout)
    assert doc["interrupted"] is True
    [executed] = doc["executed"]
    assert executed["exit_code"] == 130  # the child recorded its interrupt and exited by itself
    assert "incident" not in executed
    assert not (config.parent / ".rocky" / "incidents").exists()

    # the child's own record says interrupted, as its exit code does
    end = ending_of_child(config, 130, executed["submission_id"], Path("/dev/null"))
    assert_one_story(end, "Failure", interrupted=True)

    conn = sqlite3.connect(f"file:{store_of(config)}?mode=ro", uri=True)
    try:
        streak, outcome = conn.execute(
            "SELECT consecutive_failures, last_outcome FROM schedule_state WHERE pipeline = 'orders'"
        ).fetchone()
        claim = conn.execute("SELECT state, exit_code FROM schedule_claims").fetchall()
    finally:
        conn.close()
    assert (streak, outcome) == (0, None)
    assert claim == [("completed", 130)]

    # no failure_backoff: the next tick finds the pipeline due again
    again = rocky_in_process(["-c", str(config), "tick", "--dry-run", "--output", "json"])
    [evaluated] = json.loads(again.stdout)["evaluated"]
    assert evaluated["due"] is True, again.stdout
