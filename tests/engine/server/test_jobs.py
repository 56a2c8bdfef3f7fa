"""Jobs over real HTTP with real `rocky run` children: start, finish, refuse, persist, recover."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rocky_sdk.types_generated.error_envelope_schema import ErrorEnvelope

from rocky_engine.project import load_project
from rocky_engine.schedule.claim_lifecycle import ChildRegistry
from rocky_engine.state import RunRecord, StateStore
from rocky_engine.state.jobs import JobRepo, JobRow
from tests.engine.server.kit import (
    GOOD_MODELS,
    InProcessServer,
    child_env,
    runs_in_store,
    simple_project,
    slow_hook,
    transformation,
    wait_for,
    wait_job,
    write_project,
)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return simple_project(tmp_path)


@pytest.fixture
def server(config: Path) -> Iterator[InProcessServer]:
    with InProcessServer(config) as srv:
        yield srv


def test_a_job_runs_rocky_run_and_reports_its_outcome(server: InProcessServer, config: Path) -> None:
    with server.client() as c:
        r = c.post("/api/v1/jobs/run", json={"pipeline": "orders"})
        assert r.status_code == 202
        job_id = r.json()["job_id"]
        assert r.headers["Location"] == f"/api/v1/jobs/{job_id}"
        job = wait_job(c, job_id)
        listed = c.get("/api/v1/jobs").json()["jobs"]
    assert job["state"] == "succeeded" and job["kind"] == "run" and job["pipeline"] == "orders"
    assert set(job) >= {"job_id", "kind", "state", "submitted_at", "started_at", "finished_at", "result"}
    result = job["result"]
    assert result["outcome"] == "success" and result["exit_code"] == 0 and result["status"] == "Success"
    assert result["output"]["command"] == "run" and result["output"]["filter"] == ""
    assert job["request"] == {"pipeline": "orders"}
    [run] = runs_in_store(config)
    assert (run.run_id, run.trigger, run.submission_id) == (result["run_id"], "Manual", job_id)
    assert [j["job_id"] for j in listed] == [job_id]
    assert not (config.parent / ".rocky" / "jobs" / f"{job_id}.out").exists()


def test_a_refused_run_is_a_failed_job(server: InProcessServer) -> None:
    """`filter` only applies to replication: the child refuses it (exit 1) and the job says so."""
    with server.client() as c:
        r = c.post("/api/v1/jobs/run", json={"pipeline": "orders", "filter": "table=good"})
        assert r.status_code == 202
        job = wait_job(c, r.json()["job_id"])
    assert job["state"] == "failed"
    assert job["result"]["exit_code"] == 1
    assert job["request"] == {"pipeline": "orders", "filter": "table=good"}


def test_children_do_not_inherit_the_servers_secrets(tmp_path: Path) -> None:
    dump = tmp_path / "child-env.txt"
    config = simple_project(tmp_path, hook=f'\n[[hook.on_pipeline_start]]\ncommand = "env > {dump}"\n')
    env = {**child_env(), "ROCKY_WEBHOOK_SECRET": "hook-secret", "ROCKY_SERVE_TOKEN": "api-token"}
    with InProcessServer(config, child_env=env) as srv, srv.client() as c:
        job = wait_job(c, c.post("/api/v1/jobs/run").json()["job_id"])
    assert job["state"] == "succeeded"
    seen = dump.read_text()
    assert "ROCKY_SUBMISSION_ID=" + job["job_id"] in seen and "ROCKY_RUN_TRIGGER=manual" in seen
    assert "hook-secret" not in seen and "api-token" not in seen


def test_the_only_pipeline_is_the_default(server: InProcessServer) -> None:
    with server.client() as c:
        r = c.post("/api/v1/jobs/run")
        assert r.status_code == 202
        assert wait_job(c, r.json()["job_id"])["pipeline"] == "orders"


def test_a_failing_run_is_a_failed_job(tmp_path: Path) -> None:
    config = write_project(tmp_path, transformation("orders"), {"bad.sql": "select nope from nowhere\n"})
    with InProcessServer(config) as srv, srv.client() as c:
        job = wait_job(c, c.post("/api/v1/jobs/run", json={}).json()["job_id"])
    assert job["state"] == "failed"
    assert job["result"]["outcome"] == "failure" and job["result"]["exit_code"] == 1
    assert job["error"] == "rocky run exited 1"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "request body is not valid JSON"),
        (b"[1, 2]", "request body must be a JSON object"),
        (b'{"pipeline": "orders", "model": "x"}',
         "unknown key(s) model; the body takes 'pipeline' and 'filter'"),
        (b'{"pipeline": 7}', "'pipeline' must be a non-empty string"),
        (b'{"filter": "nokey"}', "'filter' must look like key=value"),
    ],
)
def test_400_for_a_bad_body(server: InProcessServer, body: bytes, message: str) -> None:
    with server.client() as c:
        r = c.post("/api/v1/jobs/run", content=body)
    assert r.status_code == 400 and r.json()["code"] == "bad_request"
    assert r.json()["message"].startswith(message)


def test_pipeline_is_required_with_several_and_unknown_is_404(tmp_path: Path) -> None:
    config = write_project(tmp_path, transformation("a") + transformation("b"), GOOD_MODELS)
    with InProcessServer(config) as srv, srv.client() as c:
        missing = c.post("/api/v1/jobs/run", json={})
        unknown = c.post("/api/v1/jobs/run", json={"pipeline": "zzz"})
        no_job = c.get("/api/v1/jobs/does-not-exist")
    assert missing.status_code == 400
    assert missing.json()["message"] == "'pipeline' is required: this project has 2 pipelines (a, b)"
    assert unknown.status_code == 404 and unknown.json() == {
        "code": "pipeline_not_found", "message": "unknown pipeline 'zzz'; available pipelines: a, b"}
    assert no_job.status_code == 404 and no_job.json()["code"] == "job_not_found"


@pytest.mark.slow
def test_one_mutation_at_a_time_409_names_the_running_job(tmp_path: Path) -> None:
    config = simple_project(tmp_path, hook=slow_hook(3))
    with InProcessServer(config, scheduler=True, poll_interval_seconds=0.2) as srv, srv.client() as c:
        srv.first_tick()
        first = c.post("/api/v1/jobs/run").json()["job_id"]
        second = c.post("/api/v1/jobs/run")
        running = wait_for(lambda: (doc := c.get(f"/api/v1/jobs/{first}").json()).get("pid") and doc, 20,
                           what="the child's pid")
        # The scheduler loses too: it skips its tick rather than racing the writer lock.
        wait_for(lambda: srv.ctx.last_tick.result == "mutation_in_progress", 10, what="a skipped tick")
        done = wait_job(c, first)
        third = c.post("/api/v1/jobs/run")
        wait_job(c, third.json()["job_id"])
    assert second.status_code == 409
    # the published ErrorEnvelope names the running job running_job_id; job_id stays for our clients
    ErrorEnvelope.model_validate(second.json())
    assert second.json() == {"code": "mutation_in_progress",
                             "message": f"another job is running (job {first}); retry when it finishes",
                             "job_id": first, "running_job_id": first}
    assert running["state"] == "running" and isinstance(running["pid"], int)
    assert done["state"] == "succeeded"
    assert third.status_code == 202


def test_409_while_a_scheduler_tick_holds_the_gate(server: InProcessServer) -> None:
    assert server.ctx.gate.try_acquire("scheduler", "sub-1")
    try:
        with server.client() as c:
            r = c.post("/api/v1/jobs/run")
    finally:
        server.ctx.gate.release()
    assert r.status_code == 409
    assert r.json()["message"] == "a scheduler tick is running (job sub-1); retry when it finishes"
    assert r.json()["running_job_id"] == r.json()["job_id"] == "sub-1"


def test_409_when_another_process_holds_the_state_store(server: InProcessServer, config: Path) -> None:
    project = load_project(config, env={})
    with StateStore.open(project.state_path(), writer=True), server.client() as c:
        r = c.post("/api/v1/jobs/run")
    assert r.status_code == 409 and r.json()["code"] == "mutation_in_progress"
    assert "another rocky process holds the state store writer lock" in r.json()["message"]
    assert not server.ctx.gate.busy  # a refused job gives the gate back


def test_503_while_draining(server: InProcessServer) -> None:
    server.ctx.draining.set()
    with server.client() as c:
        r = c.post("/api/v1/jobs/run")
    assert r.status_code == 503 and r.json()["code"] == "draining"


# ---------------------------------------------------------------------- restart recovery


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _owner(pid: int) -> dict[str, object]:
    return {"pid": pid, "hostname": socket.gethostname(), "instance": uuid.uuid4().hex}


def _running(job_id: str, owner: dict[str, object], t0: datetime) -> JobRow:
    return JobRow(job_id=job_id, kind="run", state="running", submitted_at=t0, started_at=t0,
                  pipeline="orders", owner=owner)


@pytest.mark.slow
def test_a_restarted_server_finalizes_the_jobs_it_can_no_longer_see(config: Path) -> None:
    project = load_project(config, env={})
    t0 = datetime.now(UTC) - timedelta(minutes=5)
    dead = _owner(_dead_pid())
    # A live process that looks like another `rocky serve` owns one job; a live child runs another.
    other_server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "serve"])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"],
                             env={**os.environ, "ROCKY_SUBMISSION_ID": "adopted"})
    try:
        registry = ChildRegistry(project.dot_rocky)
        registry.register("adopted", child.pid, "orders", t0)
        registry.register("lost", int(str(dead["pid"])), "orders", t0)  # its server died with it
        with StateStore.open(project.state_path()) as store:
            store.runs.insert(RunRecord(run_id="run-20260101-000000-000", pipeline="orders", started_at=t0,
                                        finished_at=t0 + timedelta(seconds=3), status="Success",
                                        submission_id="recorded", exit_code=0))
            JobRepo(store).upsert_many([
                _running("lost", dead, t0),
                _running("recorded", dead, t0),
                _running("elsewhere", _owner(other_server.pid), t0),
                _running("adopted", dead, t0),
            ])
        with InProcessServer(config) as srv, srv.client() as c:
            lost = c.get("/api/v1/jobs/lost").json()
            recorded = c.get("/api/v1/jobs/recorded").json()
            elsewhere = c.get("/api/v1/jobs/elsewhere").json()
            adopted = c.get("/api/v1/jobs/adopted").json()
            child.wait(timeout=10)
            final = wait_job(c, "adopted", timeout=20)
    finally:
        other_server.kill()
        other_server.wait()
    assert lost["state"] == "failed" and lost["result"] == {"outcome": "failure", "exit_code": None,
                                                            "recovered": True}
    assert lost["error"] == ("the server that launched this job stopped and its child is gone without a run "
                             "record; not retried")
    assert recorded["state"] == "succeeded"
    assert recorded["result"]["run_id"] == "run-20260101-000000-000" and recorded["result"]["recovered"]
    assert elsewhere["state"] == "running"
    assert adopted["state"] == "running"
    assert final["state"] == "failed" and final["result"]["recovered"] is True
    # the pid files of settled jobs go with them (issue 13 item 9)
    assert sorted((project.dot_rocky / "running").glob("*.json")) == []


def test_a_sweep_that_finds_the_store_busy_is_deferred_to_the_next_chance(config: Path) -> None:
    project = load_project(config, env={})
    t0 = datetime.now(UTC)
    with StateStore.open(project.state_path()) as store:
        JobRepo(store).upsert(_running("lost", _owner(_dead_pid()), t0))
    srv = InProcessServer(config)
    with StateStore.open(project.state_path()):
        assert srv.ctx.jobs.sweep() is False
    srv.start(sweep=False)
    try:
        assert srv.ctx.jobs.needs_housekeeping()
        with srv.client() as c:
            job_id = c.post("/api/v1/jobs/run").json()["job_id"]  # the next writer runs the sweep
            wait_job(c, job_id)
            assert c.get("/api/v1/jobs/lost").json()["state"] == "failed"
    finally:
        srv.stop()


def test_a_finalization_that_finds_the_store_locked_is_written_later(config: Path) -> None:
    from rocky_engine.schedule.spawner import ChildResult
    from rocky_engine.server.context import build_context
    from rocky_engine.server.settings import ServerSettings

    project = load_project(config, env={})
    ctx = build_context(ServerSettings(config_path=config), project)
    ctx.jobs.persist_attempts = 1
    t0 = datetime.now(UTC)
    row = _running("late", ctx.owner, t0)
    with StateStore.open(project.state_path()) as store:
        JobRepo(store).upsert(row)
        final = ctx.jobs._finalize(row, ChildResult(0, pid=4242, duration_ms=5), None)
    assert final.state == "succeeded"
    assert ctx.jobs.get("late") == final  # the answer does not wait for the store
    assert ctx.jobs.needs_housekeeping()
    ctx.jobs.flush()
    assert not ctx.jobs.needs_housekeeping()
    with StateStore.open(project.state_path(), writer=False) as store:
        stored = JobRepo(store).get("late")
    assert stored is not None and stored.state == "succeeded" and stored.pid == 4242
