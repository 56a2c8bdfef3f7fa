"""``kill -9`` of ``rocky load --connector`` mid-run: no process of the program survives it, whether the
program forks workers (one ignoring SIGTERM, one that left the group with ``setsid``) or hides behind a
wrapper script that does not ``exec``; and the killed attempt's scratch directory is removed."""

from __future__ import annotations

import time

import pytest

from tests.engine.connectors.kit import ConnectorProject
from tests.engine.process.kit import child_sessions, descendants, pids_in, survivors, until, wait_gone
from tests.fixtures.processes import wait_for


@pytest.mark.slow
@pytest.mark.parametrize("wrapper", [False, True], ids=["forking-program", "non-exec-wrapper"])
def test_kill_9_of_rocky_leaves_no_program_process_and_no_scratch(
    cp: ConnectorProject, wrapper: bool
) -> None:
    pids = cp.root / "pids"
    pids.mkdir()
    cp.setup("forking", f"marker={cp.marker}", f"pids={pids}", wrapper=wrapper)
    rocky = cp.popen()
    try:
        wait_for(cp.marker.exists, what="the program and its workers to start")
        [scratch] = cp.scratch_dirs()
        wait_for(lambda: len(list(scratch.glob("worker-*.tmp"))) >= 2, what="the workers to write")
        tree = descendants(rocky.pid)
        program = {int(cp.marker.read_text()), *pids_in(pids)}
        assert program <= {p.pid for p in tree}
        if wrapper:
            assert any(p.ppid == rocky.pid for p in tree)  # the supervisor; under it sh, under sh the program
        rocky.kill()
        rocky.wait()
        deadline = time.monotonic() + 2.0
        left = wait_gone(tree, child_sessions(tree), deadline=deadline)
        assert left == [], f"alive 2 s after rocky was killed: {left}"
        assert until(lambda: cp.scratch_dirs() == [], deadline), "the killed attempt's scratch is still there"
    finally:
        if rocky.poll() is None:
            rocky.kill()
            rocky.wait()
    # nothing wrote there since: the landing directory stays empty
    assert survivors(tree) == [] and cp.scratch_dirs() == []
