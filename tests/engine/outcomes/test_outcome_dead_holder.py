"""A keyed run killed with ``kill -9`` does not block its key for the claim's TTL (issue 13 item 11).

Measured: every retry answered ``SkippedInFlight``, exit 0, for 24 h. The claim records its holder (host,
pid, process start time); the next run, holding the writer lock, finds that process gone from this host
and adopts the key at once, as it adopts an expired claim. A live holder still makes it skip.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from rocky_engine.process.identity import Holder, provably_dead, this_process
from rocky_engine.state.store import StateStore
from tests.engine.outcomes.kit import assert_one_story, ending_in_process, project, store_of
from tests.engine.process.kit import sleeping_hook, wait_for_hook
from tests.fixtures.projects import popen_rocky

GOOD = {"good.sql": "select 1 as x\n"}


@pytest.mark.slow
def test_a_key_held_by_a_killed_run_is_adopted_at_once(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    config = project(tmp_path / "p", GOOD, sleeping_hook(pids))
    proc = popen_rocky(["-c", str(config), "run", "--output", "json", "--idempotency-key", "nightly"],
                       cwd=config.parent)
    try:
        wait_for_hook(pids)  # the key is claimed; the run sits in its pipeline_start hook
        with StateStore.open(store_of(config), writer=False) as store:
            entry = store.idempotency.get("nightly")
        assert entry is not None and entry.state == "in_flight"
        holder = Holder.decode(entry.holder)
        assert holder is not None and holder.pid == proc.pid and not provably_dead(holder)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert provably_dead(holder)

    project(tmp_path / "p", GOOD)  # the retry runs without the sleeping hook
    end = ending_in_process(config, "--idempotency-key", "nightly")
    assert "is no longer running on this host (killed?); this run takes the key over" in end.stderr
    assert end.doc["idempotency_key"] == "nightly"
    assert_one_story(end, "Success")
    with StateStore.open(store_of(config), writer=False) as store:
        done = store.idempotency.get("nightly")
    assert done is not None and (done.state, done.run_id) == ("succeeded", end.doc["run_id"])


def test_a_live_holder_still_holds_its_key(tmp_path: Path) -> None:
    """This test process stands in for a live holder: the claim is not adopted before its TTL."""
    config = project(tmp_path, GOOD)
    assert ending_in_process(config).code == 0  # the store exists
    from datetime import UTC, datetime

    with StateStore.open(store_of(config), writer=True) as store:
        decision = store.idempotency.claim("k", "run-holder", now=datetime.now(UTC), ttl_hours=24)
        assert decision.proceed
        entry = store.idempotency.get("k")
    assert entry is not None and Holder.decode(entry.holder) == this_process()
    end = ending_in_process(config, "--idempotency-key", "k")
    assert end.code == 0 and end.doc["status"] == "SkippedInFlight", json.dumps(end.doc)
    assert end.doc["skipped_by_run_id"] == "run-holder"
