"""``--resume-latest`` after a success is an ordinary incremental run (issue 13 item 10).

Measured: a cron wrapper that always passes ``--resume-latest`` resumed the earlier *successful* run,
skipped every table and never copied new rows again, exit 0. Resume skips only what a run that did not
succeed finished; after a success (also when the latest attempt was killed before it wrote anything) the
run copies what is new and its document says why nothing was resumed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.engine.process.kit import sleeping_hook, wait_for_hook
from tests.engine.replication.conftest import ReplicationProject


@pytest.fixture
def rp(tmp_path: Path) -> ReplicationProject:
    project = ReplicationProject(tmp_path)
    project.configure()
    project.source_table("src__orders", "orders", rows=5)
    return project


def _assert_ordinary(rp: ReplicationProject, success_id: str) -> None:
    rp.append("src__orders", "orders", start=5, rows=3)  # new source rows since the success
    out = rp.run(resume_latest=True)
    assert out.status == "Success" and out.exit_code() == 0
    doc = out.wire()
    assert "resumed_from" not in doc and "tables_skipped" not in doc
    assert doc["resume_note"] == (
        f"nothing to resume: the latest run of pipeline 'raw' ({success_id}) succeeded; running as an "
        "ordinary incremental run"
    )
    assert [m["rows_copied"] for m in doc["materializations"]] == [3]
    assert rp.count("stg__orders.orders") == 8


def test_resume_latest_after_a_success_copies_what_is_new(rp: ReplicationProject) -> None:
    first = rp.run()
    assert first.status == "Success" and first.run_id is not None
    _assert_ordinary(rp, first.run_id)


@pytest.mark.slow
def test_resume_latest_after_a_kill_before_any_progress(rp: ReplicationProject, tmp_path: Path) -> None:
    first = rp.run()
    assert first.run_id is not None
    pids = tmp_path / "pids"
    pids.mkdir()
    rp.config.write_text(rp.config.read_text() + sleeping_hook(pids))
    proc = rp.popen("run", "--pipeline", "raw", "--output", "json")
    try:
        wait_for_hook(pids)  # in pipeline_start: nothing written yet
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for pid in wait_for_hook(pids, timeout=0):  # the hook's own processes are not under test here
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    rp.config.write_text(rp.config.read_text().split("\n[[hook.on_pipeline_start]]")[0])
    with rp.store() as store:
        assert [r.run_id for r in store.runs.list()] == [first.run_id]  # the killed attempt left nothing
    _assert_ordinary(rp, first.run_id)
