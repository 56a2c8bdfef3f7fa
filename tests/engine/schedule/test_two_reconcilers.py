"""Two live reconcilers on one project: A holds the tick lock with a stale heartbeat while it is paused
inside its spawner; B takes the lock over and runs what is due. When A resumes, its rows are the ones it
read before B ran: only the cron anchor compare-and-swap and the claim key stop it from running the same
demand again. One claim and one child per occurrence, whatever the interleaving.

The interleaving is forced with events (A's child says "paused" and waits for "resume"), not with time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from rocky_engine.schedule.spawner import ChildRequest
from rocky_engine.schedule.tick_lock import STALE_AFTER_SECONDS
from rocky_engine.schedule.tick_output import TickOutput
from rocky_engine.state import StateStore
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import T0, Clock, SimChild, project_at, reconciler, sources, transformation

MODELS = {"a.sql": "select 1 as x\n"}
BODY = (
    transformation("a_first", 'cron = "0 * * * *"')
    + transformation("c_cron", 'cron = "0 * * * *"')
    + transformation("p_fresh", "freshness = true")
    + "\n[freshness]\nexpected_lag_seconds = 60\n"
)


def _entry(out: TickOutput, pipeline: str, source: str) -> tuple[str, str | None]:
    for evaluated in out.evaluated:
        if evaluated.pipeline == pipeline:
            for s in evaluated.sources:
                if s.source == source:
                    return s.reason, s.detail
    raise AssertionError(f"{pipeline}/{source} not evaluated: {out.wire()}")


def test_a_stale_holder_resuming_after_an_override_runs_nothing_twice(tmp_path: Path) -> None:
    project = project_at(tmp_path, BODY, MODELS)
    warm = Clock(T0 + timedelta(minutes=30))
    reconciler(warm, SimChild(warm)).tick(project)  # first sight: cron anchors; p_fresh runs once

    now = T0 + timedelta(hours=1, seconds=30)
    paused, resume = threading.Event(), threading.Event()

    def pause_in_a_first(request: ChildRequest) -> None:
        if request.pipeline == "a_first":
            paused.set()
            assert resume.wait(60), "the test never resumed A"

    clock_a, clock_b = Clock(now), Clock(now)
    child_a = SimChild(clock_a, on_run=pause_in_a_first)
    child_b = SimChild(clock_b, codes={"p_fresh": [1]})  # B's run fails: p_fresh stays due for freshness
    # A never refreshes its heartbeat (a wedged process); B's wall clock is past the stale threshold.
    rec_a = reconciler(clock_a, child_a, heartbeat_interval_seconds=3600)
    rec_b = reconciler(clock_b, child_b)
    rec_b.wall = lambda: time.time() + STALE_AFTER_SECONDS + 1
    outs: dict[str, TickOutput] = {}
    thread = threading.Thread(target=lambda: outs.setdefault("a", rec_a.tick(project)))
    thread.start()
    try:
        assert paused.wait(60), "A never reached its spawner"
        out_b = rec_b.tick(project)
    finally:
        resume.set()
        thread.join(60)
    out_a = outs["a"]

    assert out_b.lock_overridden
    assert [e.pipeline for e in out_b.executed] == ["c_cron", "p_fresh"]
    assert _entry(out_b, "a_first", "cron")[0] == "in_flight"  # A's claim is still submitted
    assert [e.pipeline for e in out_a.executed] == ["a_first"]
    # the cron occurrence B took is refused by the anchor compare-and-swap, before any claim is tried
    assert _entry(out_a, "c_cron", "cron") == ("dedup", "another reconciler already took this occurrence")
    # the same-instant freshness demand is refused by its claim key
    reason, detail = _entry(out_a, "p_fresh", "freshness")
    assert reason == "dedup" and detail is not None and "already exists" in detail, (reason, detail)
    assert sources(out_a, "p_fresh") == {"freshness": "dedup"}

    # one claim and one child per occurrence
    assert child_a.pipelines() == ["a_first"] and child_b.pipelines() == ["c_cron", "p_fresh"]
    with StateStore.open(project.state_path(), writer=False) as store:
        claims = [c for c in ClaimRepo(store).recent(limit=100) if c.logical_ts is not None]
        keys = [c.claim_key for c in claims]
        assert len(keys) == len(set(keys))
        hour = [c.pipeline for c in claims if c.source == "cron" and c.logical_ts == T0 + timedelta(hours=1)]
        assert sorted(hour) == ["a_first", "c_cron"]
        assert ClaimRepo(store).submitted() == []


def test_a_demand_still_running_under_the_overrider_is_in_flight_for_the_resumed_holder(
    tmp_path: Path,
) -> None:
    """B is itself paused inside p_fresh's child when A resumes. A's rows say p_fresh is due, and its key
    (A's tick instant) differs from B's: only the in-transaction "a claim is submitted" check stops A."""
    project = project_at(tmp_path, BODY, MODELS)
    warm = Clock(T0 + timedelta(minutes=30))
    reconciler(warm, SimChild(warm)).tick(project)

    now = T0 + timedelta(hours=1, seconds=30)
    a_paused, a_resume = threading.Event(), threading.Event()
    b_paused, b_resume = threading.Event(), threading.Event()

    def pause_on(
        pipeline: str, paused: threading.Event, resume: threading.Event
    ) -> Callable[[ChildRequest], None]:
        def on_run(request: ChildRequest) -> None:
            if request.pipeline == pipeline:
                paused.set()
                assert resume.wait(60), f"the test never resumed {pipeline}"

        return on_run

    clock_a, clock_b = Clock(now), Clock(now + timedelta(seconds=1))
    child_a = SimChild(clock_a, on_run=pause_on("a_first", a_paused, a_resume))
    child_b = SimChild(clock_b, on_run=pause_on("p_fresh", b_paused, b_resume))
    rec_a = reconciler(clock_a, child_a, heartbeat_interval_seconds=3600)
    rec_b = reconciler(clock_b, child_b, heartbeat_interval_seconds=3600)
    rec_b.wall = lambda: time.time() + STALE_AFTER_SECONDS + 1
    outs: dict[str, TickOutput] = {}
    thread_a = threading.Thread(target=lambda: outs.setdefault("a", rec_a.tick(project)))
    thread_b = threading.Thread(target=lambda: outs.setdefault("b", rec_b.tick(project)))
    thread_a.start()
    try:
        assert a_paused.wait(60), "A never reached its spawner"
        thread_b.start()
        assert b_paused.wait(60), "B never reached p_fresh's child"
        a_resume.set()
        thread_a.join(60)
    finally:
        a_resume.set()
        b_resume.set()
        thread_a.join(60)
        if thread_b.is_alive() or b_paused.is_set():
            thread_b.join(60)

    assert [e.pipeline for e in outs["b"].executed] == ["c_cron", "p_fresh"]
    assert [e.pipeline for e in outs["a"].executed] == ["a_first"]
    assert _entry(outs["a"], "p_fresh", "freshness")[0] == "in_flight"
    assert child_a.pipelines() == ["a_first"] and child_b.pipelines() == ["c_cron", "p_fresh"]
