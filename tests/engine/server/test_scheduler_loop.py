"""The resident scheduler: held until the server is up, config re-read each tick, errors survived, runs
recorded as jobs, metrics counted."""

from __future__ import annotations

import threading
from pathlib import Path

from rocky_sdk.types_generated.job_status_schema import JobStatus

from rocky_engine.project import load_project
from rocky_engine.server.context import build_context
from rocky_engine.server.scheduler_loop import SchedulerLoop
from rocky_engine.server.settings import ServerSettings
from tests.engine.server.kit import (
    GOOD_MODELS,
    InProcessServer,
    child_env,
    runs_in_store,
    simple_project,
    transformation,
    wait_for,
    wait_job,
    write_project,
)

FRESHNESS = '\n[freshness]\nexpected_lag_seconds = 3600\n' + transformation("orders", "freshness = true")


class _PolledEvent(threading.Event):
    """The server's ``started`` event, counting how often the loop has polled it (a handshake: the loop
    has been waiting on it, rather than the test waiting some time)."""

    def __init__(self) -> None:
        super().__init__()
        self.polls = threading.Semaphore(0)

    def wait(self, timeout: float | None = None) -> bool:
        result = super().wait(timeout)
        self.polls.release()
        return result


def test_the_first_tick_waits_until_the_server_is_up(tmp_path: Path) -> None:
    config = simple_project(tmp_path, FRESHNESS)
    settings = ServerSettings(config_path=config, scheduler=True, poll_interval_seconds=0.05,
                              child_env=child_env())
    ctx = build_context(settings, load_project(config, env={}))
    ctx.started = started = _PolledEvent()
    loop = SchedulerLoop(ctx)
    loop.start()
    try:
        for _ in range(3):  # three polls of an unset event: the loop is holding back, not slow to start
            assert started.polls.acquire(timeout=30), "the loop never waited for the server"
        assert ctx.last_tick.at is None and runs_in_store(config) == []
        assert not (tmp_path / ".rocky" / "tick.lock").exists()
        ctx.started.set()
        wait_for(lambda: ctx.last_tick.at is not None, 30, what="the first tick")
    finally:
        loop.request_stop()
        loop.join(60)
    assert not loop.thread.is_alive()


def test_scheduled_and_webhook_runs_are_jobs_with_the_submission_id(tmp_path: Path) -> None:
    config = simple_project(tmp_path, FRESHNESS)
    with InProcessServer(config, scheduler=True, poll_interval_seconds=0.2) as srv, srv.client() as c:
        def of_trigger(trigger: str) -> list[dict[str, object]]:
            return [j for j in c.get("/api/v1/jobs").json()["jobs"] if j["trigger"] == trigger]

        scheduled = wait_for(lambda: of_trigger("schedule"), 60, what="the freshness run")
        job = wait_job(c, scheduled[0]["job_id"])
        c.post("/api/v1/hooks/trigger/orders", content=b"{}")
        hooked = wait_for(lambda: of_trigger("webhook"), 60, what="the webhook run")
        hook_job = wait_job(c, hooked[0]["job_id"])
        # the job is final before its tick is (the tick finalizes the claim, then counts): wait for the count
        fired = 'rocky_scheduler_demands_fired_total{pipeline="orders",source="webhook"} 1'
        metrics = wait_for(lambda: text if fired in (text := c.get("/metrics").text) else None, 30,
                           what="the webhook tick's metrics")
    # both are runs to the published JobStatus (its kind enum has no "schedule" / "webhook"); the trigger
    # is a field of ours beside it
    for one, trigger in ((job, "schedule"), (hook_job, "webhook")):
        JobStatus.model_validate(one)
        assert (one["kind"], one["trigger"]) == ("run", trigger), one
    assert job["state"] == "succeeded" and job["pipeline"] == "orders"
    assert job["result"]["output"]["command"] == "run"
    assert hook_job["state"] == "succeeded"
    by_submission = {r.submission_id: r for r in runs_in_store(config)}
    assert by_submission[job["job_id"]].trigger == "Schedule"
    assert by_submission[hook_job["job_id"]].trigger == "Webhook"
    assert 'rocky_scheduler_demands_fired_total{pipeline="orders",source="freshness"} 1' in metrics
    assert 'rocky_scheduler_demands_fired_total{pipeline="orders",source="webhook"} 1' in metrics
    assert 'rocky_runs_total{trigger="webhook",outcome="success"} 1' in metrics
    assert 'rocky_jobs{state="succeeded"} 2' in metrics
    assert "rocky_webhook_spool_depth 0" in metrics


def test_config_is_reread_every_tick_and_a_broken_edit_is_survived(tmp_path: Path) -> None:
    config = simple_project(tmp_path)  # nothing scheduled yet
    with InProcessServer(config, scheduler=True, poll_interval_seconds=0.1) as srv, srv.client() as c:
        srv.first_tick()
        config.write_text(config.read_text() + "\n[pipeline.orders.schedule\nbroken", encoding="utf-8")
        wait_for(lambda: srv.ctx.last_tick.result == "config_error", 10, what="a config_error tick")
        schedule = c.get("/api/v1/schedule").json()
        metrics = c.get("/metrics").text
        assert "rocky_config_error 1" in metrics
        assert 'rocky_scheduler_ticks_total{result="config_error"}' in metrics
        # The fix (now with a schedule) is picked up by the next tick without a restart.
        write_project(tmp_path, FRESHNESS, GOOD_MODELS)
        wait_for(lambda: any(j["trigger"] == "schedule" for j in c.get("/api/v1/jobs").json()["jobs"]), 60,
                 what="a run under the edited config")
        healed = c.get("/api/v1/schedule").json()
    assert schedule["scheduler"]["last_tick"]["result"] == "config_error"
    assert "rocky.toml" in schedule["config_error"]
    assert schedule["scheduler"]["last_tick"]["detail"] == schedule["config_error"]
    assert "config_error" not in healed
    assert [p["pipeline"] for p in healed["pipelines"]] == ["orders"]


def test_an_unresolvable_schedule_is_logged_and_the_loop_goes_on(tmp_path: Path) -> None:
    body = transformation("a", 'after = ["b"]') + transformation("b", 'after = ["a"]')
    config = write_project(tmp_path, body, GOOD_MODELS)
    with InProcessServer(config, scheduler=True, poll_interval_seconds=0.05) as srv, srv.client() as c:
        wait_for(lambda: srv.ctx.metrics.ticks[(("result", "config_error"),)] >= 3, 10, what="3 ticks")
        schedule = c.get("/api/v1/schedule").json()
    assert srv.loop is not None and not srv.loop.thread.is_alive()  # stopped by the drain, not by the error
    assert "cycle" in (srv.ctx.last_tick.detail or "").lower()
    assert schedule["pipelines"] == [] and "cycle" in schedule["config_error"].lower()
