"""Overlap: eight reconcilers started together on one project fire each cron occurrence exactly once.

Two shapes, both with real, separate processes contending on the real tick lock, state-store writer lock
and claims:

- a simulated day at a coarser step (every 15 minutes, 96 rounds): eight processes forked per round run
  :class:`Reconciler` with a child that records its run in the store (no warehouse work), which keeps a
  day of rounds at a few seconds;
- a shorter stretch through the real CLI: eight ``rocky tick`` processes per simulated minute over six
  minutes with a cron every minute and real ``rocky run`` children.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.project import Project, load_project
from rocky_engine.state import StateStore
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import ROCKY, T0, Clock, SimChild, reconciler, transformation, write_project

WORKERS = 8
STEP = timedelta(minutes=15)
ROUNDS = 96


def _worker(project: Project, now_iso: str, barrier: multiprocessing.synchronize.Barrier, out: str) -> None:
    clock = Clock(datetime.fromisoformat(now_iso))
    barrier.wait(timeout=30)
    result = reconciler(clock, SimChild(clock)).tick(project)
    Path(out).write_text(json.dumps(result.wire()))
    os._exit(0)


def _cron_claims(state: Path) -> dict[str, list[str]]:
    with StateStore.open(state, writer=False) as store:
        fired: dict[str, list[str]] = {}
        for claim in reversed(ClaimRepo(store).recent(limit=10_000)):
            if claim.source == "cron":
                fired.setdefault(claim.pipeline, []).append(claim.logical_ts.isoformat())  # type: ignore[union-attr]
        return fired


def _run_counts(state: Path) -> Counter[str]:
    with StateStore.open(state, writer=False) as store:
        return Counter(r.pipeline or "" for r in store.runs.list(limit=None))


@pytest.mark.slow
def test_eight_reconcilers_over_a_simulated_day(tmp_path: Path) -> None:
    body = (
        transformation("quarter_hourly", 'cron = "*/15 * * * *"')
        + transformation("hourly", 'cron = "0 * * * *"\ntimezone = "Europe/Lisbon"')
        + transformation("daily", 'cron = "0 3 * * *"\ntimezone = "America/New_York"')
        + transformation("downstream", 'after = ["hourly"]')
    )
    config = write_project(tmp_path, body, {"a.sql": "select 1 as x\n"})
    project = load_project(config, env={})
    # Warm the imports the reconciler makes lazily, so each forked process only ticks.
    reconciler(Clock(T0), SimChild(Clock(T0))).tick(project, dry_run=True)
    start = T0.replace(hour=0)
    ctx = multiprocessing.get_context("fork")
    executed = 0
    for n in range(ROUNDS + 1):
        now = start + n * STEP
        barrier = ctx.Barrier(WORKERS)
        outs = [tmp_path / f"out-{n}-{w}.json" for w in range(WORKERS)]
        procs = [ctx.Process(target=_worker, args=(project, now.isoformat(), barrier, str(o))) for o in outs]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        docs = [json.loads(o.read_text()) for o in outs]
        executed += sum(len(d["executed"]) for d in docs)
        assert all(e["outcome"] == "success" for d in docs for e in d["executed"])
    state = project.state_path()
    fired = _cron_claims(state)
    end = start + ROUNDS * STEP

    def expected(step: timedelta, first: datetime) -> list[str]:
        out, t = [], first
        while t <= end:
            out.append(t.isoformat())
            t += step
        return out

    assert fired["quarter_hourly"] == expected(timedelta(minutes=15), start + timedelta(minutes=15))
    assert fired["hourly"] == expected(timedelta(hours=1), start + timedelta(hours=1))
    assert fired["daily"] == [datetime(2026, 5, 2, 7, 0, tzinfo=start.tzinfo).isoformat()]  # 03:00 EDT
    counts = _run_counts(state)
    assert counts["quarter_hourly"] == 96 and counts["hourly"] == 24 and counts["daily"] == 1
    assert counts["downstream"] == counts["hourly"]  # one downstream run per upstream success
    assert executed == sum(counts.values())
    with StateStore.open(state, writer=False) as store:
        assert ClaimRepo(store).submitted() == []


@pytest.mark.slow
def test_eight_rocky_tick_processes_with_real_children(tmp_path: Path) -> None:
    write_project(
        tmp_path, transformation("every_minute", 'cron = "* * * * *"'), {"a.sql": "select 1 as x\n"}
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_")}
    minutes = 6
    executed: list[str] = []
    for n in range(minutes + 1):
        now = (T0 + timedelta(minutes=n, seconds=5)).isoformat()
        procs = [
            subprocess.Popen(
                [*ROCKY, "tick", "--now", now, "--output", "json"],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for _ in range(WORKERS)
        ]
        for p in procs:
            stdout, _ = p.communicate(timeout=120)
            assert p.returncode == 0, stdout
            doc = json.loads(stdout)
            executed += [e["logical_ts"] for e in doc["executed"]]
    expected = [
        (T0 + timedelta(minutes=m)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for m in range(1, minutes + 1)
    ]
    assert sorted(executed) == expected
    state = load_project(tmp_path / "rocky.toml", env={}).state_path()
    assert _run_counts(state)["every_minute"] == minutes
