"""The real ``rocky serve`` process: crash recovery, a flood, the drain, two servers on one project."""

from __future__ import annotations

import itertools
import json
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from rocky_engine.project import load_project
from rocky_engine.state import StateStore
from rocky_engine.state.jobs import JobRepo
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.server.kit import (
    SECRET,
    runs_in_store,
    serving,
    sign,
    simple_project,
    slow_hook,
    spool_files,
    transformation,
    wait_for,
    wait_job,
)

pytestmark = pytest.mark.slow
HOOK = "/api/v1/hooks/trigger/orders"
SIGNED = {"ROCKY_WEBHOOK_SECRET": SECRET}


def _ticked(client: httpx.Client) -> bool:
    return "last_tick" in client.get("/api/v1/schedule").json()["scheduler"]


def _more_ticks(client: httpx.Client, count: int) -> None:
    """Handshake: ``count`` more scheduler ticks have been recorded since now."""
    def at() -> str:
        return str(client.get("/api/v1/schedule").json()["scheduler"].get("last_tick", {}).get("at"))

    seen = {at()}
    wait_for(lambda: seen.add(at()) or len(seen) > count, 60, what=f"{count} more ticks")


def _draining(srv: Any) -> bool:
    return "draining (no new work" in srv.log()


def _server_read_everything(sock: socket.socket) -> bool:
    """The server's end of ``sock`` has nothing left in its receive queue (it read what we sent), from
    the kernel's table of TCP sockets."""
    ours = f"{sock.getsockname()[1]:04X}"
    server = f"{sock.getpeername()[1]:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{server}") and fields[2].endswith(f":{ours}"):
            return int(fields[4].split(":")[1], 16) == 0
    return False


def _jobs(client: httpx.Client, trigger: str) -> list[dict[str, Any]]:
    return [j for j in client.get("/api/v1/jobs").json()["jobs"] if j["trigger"] == trigger]


def test_kill_9_between_the_202_and_the_tick_then_restart_runs_the_demand_once(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    args = ("--scheduler", "--poll-interval-seconds", "3600")
    with serving(tmp_path, *args, env=SIGNED, name="first") as first, first.client() as c:
        wait_for(lambda: _ticked(c), what="the startup tick")
        body = b'{"sync": "done"}'
        r = c.post(HOOK, content=body, headers={**sign(body), "X-Rocky-Delivery": "evt-crash"})
        assert r.status_code == 202 and r.json()["demand"] == "accepted"
        first.signal(signal.SIGKILL)
        first.wait()
    [queued] = spool_files(tmp_path)
    assert json.loads(queued.read_text())["demand_uid"] == r.json()["demand_uid"]
    assert runs_in_store(config) == []
    again = ("--scheduler", "--poll-interval-seconds", "0.2")
    with serving(tmp_path, *again, env=SIGNED, name="second") as second, second.client() as c:
        wait_for(lambda: runs_in_store(config), 60, what="the webhook run")
        redelivered = c.post(HOOK, content=body, headers={**sign(body), "X-Rocky-Delivery": "evt-crash"})
        _more_ticks(c, 3)  # several more ticks: nothing left to run
        [job] = _jobs(c, "webhook")
    [run] = runs_in_store(config)
    assert run.trigger == "Webhook" and run.status == "Success" and run.submission_id == job["job_id"]
    assert redelivered.json() == {"demand": "duplicate"}
    assert spool_files(tmp_path) == []


def test_a_flood_is_shed_with_429_before_any_write_and_the_server_stays_responsive(tmp_path: Path) -> None:
    simple_project(tmp_path)
    args = ("--scheduler", "--poll-interval-seconds", "3600", "--webhook-rate", "10", "--webhook-burst", "20")
    with serving(tmp_path, *args, env=SIGNED) as srv, srv.client() as c:
        wait_for(lambda: _ticked(c), what="the startup tick")
        health_latencies: list[float] = []
        stop = threading.Event()

        def probe() -> None:
            with srv.client() as hc:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    assert hc.get("/api/v1/health").status_code == 200
                    health_latencies.append(time.perf_counter() - t0)
                    time.sleep(0.02)

        def fire(i: int) -> httpx.Response:
            body = f'{{"n": {i}}}'.encode()
            return clients[i % len(clients)].post(HOOK, content=body, headers=sign(body))

        clients = [srv.client() for _ in range(16)]
        prober = threading.Thread(target=probe)
        prober.start()
        t0 = time.monotonic()
        try:
            with ThreadPoolExecutor(16) as pool:
                answers = list(pool.map(fire, range(1000)))
        finally:
            elapsed = time.monotonic() - t0
            stop.set()
            prober.join()
            for client in clients:
                client.close()
        metrics = c.get("/metrics").text
    statuses = [a.status_code for a in answers]
    accepted = statuses.count(202)
    limited = [a for a in answers if a.status_code == 429]
    assert accepted + len(limited) == 1000
    assert 20 <= accepted <= 20 + 10 * elapsed + 2
    assert all(int(a.headers["Retry-After"]) >= 1 for a in limited)
    assert len(spool_files(tmp_path)) == accepted  # a 429 wrote nothing
    assert health_latencies and max(health_latencies) < 1.0
    assert f'rocky_webhook_requests_total{{status="429"}} {len(limited)}' in metrics


def test_drain_lets_a_running_job_finish_within_the_window(tmp_path: Path) -> None:
    config = simple_project(tmp_path, hook=slow_hook(2))
    with serving(tmp_path, "--drain-timeout-seconds", "30") as srv, srv.client() as c:
        job_id = c.post("/api/v1/jobs/run").json()["job_id"]
        wait_for(lambda: c.get(f"/api/v1/jobs/{job_id}").json().get("pid"), 20, what="the child")
        t0 = time.monotonic()
        srv.signal(signal.SIGTERM)
        code = srv.wait(60)
        waited = time.monotonic() - t0
        doc = srv.output()
    assert code == 0
    assert doc["command"] == "serve" and doc["drained"] is True and doc["child_terminated"] is False
    assert 0.5 < waited < 25
    project = load_project(config, env={})
    with StateStore.open(project.state_path(), writer=False) as store:
        job = JobRepo(store).get(job_id)
    assert job is not None and job.state == "succeeded"
    assert "draining" in srv.log() or "SIGTERM" in srv.log()


def test_drain_terminates_a_scheduled_child_past_the_window_without_an_incident(tmp_path: Path) -> None:
    config = simple_project(tmp_path, hook=slow_hook(30))
    args = ("--scheduler", "--poll-interval-seconds", "0.2", "--drain-timeout-seconds", "1",
            "--kill-grace-seconds", "1")
    with serving(tmp_path, *args) as srv, srv.client() as c:
        c.post(HOOK, content=b"{}")
        job = wait_for(lambda: [j for j in _jobs(c, "webhook") if j.get("pid")], 30, what="the child")[0]
        t0 = time.monotonic()
        srv.signal(signal.SIGTERM)
        code = srv.wait(60)
        waited = time.monotonic() - t0
        doc = srv.output()
    assert code == 0 and doc["child_terminated"] is True
    assert waited < 15  # drain window (1 s) + kill grace (1 s) + bookkeeping, not the child's 30 s
    project = load_project(config, env={})
    with StateStore.open(project.state_path(), writer=False) as store:
        row = JobRepo(store).get(job["job_id"])
        claims = store.query("SELECT state, outcome FROM schedule_claims")
        assert ClaimRepo(store).submitted() == []
    assert row is not None and row.state == "failed"
    assert row.result is not None and row.result["drained"] is True and row.result["outcome"] == "failure"
    assert row.error == "terminated by the server's shutdown drain; not retried"
    assert [(c["state"], c["outcome"]) for c in claims] == [("completed", "failure")]
    incidents = tmp_path / ".rocky" / "incidents"
    assert not incidents.exists() or list(incidents.iterdir()) == []


def test_a_second_signal_cuts_the_drain_window_short(tmp_path: Path) -> None:
    simple_project(tmp_path, hook=slow_hook(30))
    args = ("--drain-timeout-seconds", "60", "--kill-grace-seconds", "1")
    with serving(tmp_path, *args) as srv, srv.client() as c:
        job_id = c.post("/api/v1/jobs/run").json()["job_id"]
        wait_for(lambda: c.get(f"/api/v1/jobs/{job_id}").json().get("pid"), 20, what="the child")
        t0 = time.monotonic()
        srv.signal(signal.SIGTERM)
        wait_for(lambda: _draining(srv), 30, what="the drain")  # the first signal was handled
        srv.signal(signal.SIGTERM)
        assert srv.wait(60) == 0
        assert time.monotonic() - t0 < 20
    assert srv.output()["child_terminated"] is True
    assert "second SIGTERM: terminating the running child now" in srv.log()


def test_an_in_flight_request_completes_during_the_drain(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path, "--scheduler", "--poll-interval-seconds", "3600") as srv:
        host, port = srv.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            body = b'{"late": true}'
            head = (f"POST {HOOK} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
                    "Content-Type: application/json\r\n\r\n").encode()
            sock.sendall(head + body[:5])
            wait_for(lambda: _server_read_everything(sock), 30, what="the server to read the head")
            srv.signal(signal.SIGTERM)  # the request is half received
            wait_for(lambda: _draining(srv), 30, what="the drain")
            sock.sendall(body[5:])
            chunks = []
            while chunk := sock.recv(65536):  # "connection: close": read to the end
                chunks.append(chunk)
            answer = b"".join(chunks).decode()
        assert srv.wait(30) == 0
    assert answer.startswith("HTTP/1.1 202"), answer
    assert '"accepted"' in answer
    assert len(spool_files(tmp_path)) == 1


def test_sigint_drains_too(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path) as srv:
        srv.signal(signal.SIGINT)
        assert srv.wait(30) == 0
        assert srv.output()["drained"] is True


def test_two_servers_on_one_project_never_tick_at_the_same_time(tmp_path: Path) -> None:
    body = transformation("orders", "freshness = true") + "\n[freshness]\nexpected_lag_seconds = 3600\n"
    config = simple_project(tmp_path, body, hook=slow_hook(1.5))
    args = ("--scheduler", "--poll-interval-seconds", "0.2")
    with (
        serving(tmp_path, *args, name="a") as a, serving(tmp_path, *args, name="b") as b,
        a.client() as ca, b.client() as cb,
    ):
        for i, client in enumerate([ca, cb, ca]):
            assert client.post(HOOK, content=f"{i}".encode()).json()["demand"] == "accepted"
        wait_for(lambda: len(runs_in_store(config)) >= 4 and not spool_files(tmp_path), 120, what="four runs")
        for client in (ca, cb):
            _more_ticks(client, 2)  # each server's view of the runs is settled
        metrics = ca.get("/metrics").text + cb.get("/metrics").text
        jobs = _jobs(ca, "webhook") + _jobs(ca, "schedule")
        for job in jobs:
            wait_job(ca, job["job_id"])
    runs = sorted(runs_in_store(config), key=lambda r: r.started_at)
    assert sorted(r.trigger for r in runs) == ["Schedule", "Webhook", "Webhook", "Webhook"]
    for earlier, later in itertools.pairwise(runs):
        assert earlier.finished_at is not None and earlier.finished_at <= later.started_at
    skipped = sum(
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
        if line.startswith("rocky_scheduler_ticks_total{")
        and ("tick_in_progress" in line or "state_busy" in line)
    )
    assert skipped >= 1
