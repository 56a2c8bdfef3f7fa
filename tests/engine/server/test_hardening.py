"""Issue 18 against real ``rocky serve`` processes: what a browser page on the developer's machine could
do before (a cross-origin run, a rebinding read, an unsigned webhook with a token set) is refused, and the
clients that should work still do."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.engine.server.kit import (
    runs_in_store,
    serving,
    sign,
    simple_project,
    spool_files,
    wait_for,
    wait_job,
)

pytestmark = pytest.mark.slow
HOOK = "/api/v1/hooks/trigger/orders"
#: the measured attack: a "simple" request, sent by browsers without a CORS preflight
EVIL = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}


def _ticked(c: httpx.Client) -> bool:
    return "last_tick" in c.get("/api/v1/schedule").json()["scheduler"]


def test_a_cross_origin_post_is_403_and_runs_nothing_while_a_plain_client_still_runs(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    with serving(tmp_path) as srv, srv.client() as c:
        refused = c.post("/api/v1/jobs/run", content=b'{"pipeline":"orders"}', headers=EVIL)
        assert c.get("/api/v1/jobs").json()["jobs"] == []
        assert runs_in_store(config) == []
        accepted = c.post("/api/v1/jobs/run", json={"pipeline": "orders"})  # curl or Dagster: no Origin
        job = wait_job(c, accepted.json()["job_id"])
        log = srv.log()
    assert refused.status_code == 403 and refused.json()["code"] == "cross_origin"
    assert accepted.status_code == 202 and job["state"] == "succeeded"
    assert len(runs_in_store(config)) == 1
    assert log.count("refused a request with 403 cross_origin: Origin 'http://evil.example'") == 1


def test_a_foreign_host_is_refused_on_get_and_post_and_logged_once(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    with serving(tmp_path) as srv, srv.client() as c:
        port = srv.url.rsplit(":", 1)[1]
        rebound = {"Host": f"attacker.example:{port}"}
        reads = [c.get(p, headers=rebound) for p in ("/api/v1/runs", "/api/v1/jobs", "/api/v1/schedule")]
        again = c.get("/api/v1/runs", headers=rebound)
        post = c.post("/api/v1/jobs/run", json={"pipeline": "orders"}, headers=rebound)
        own = c.get("/api/v1/runs", headers={"Host": f"localhost:{port}"})
        log = srv.log()
    assert [r.status_code for r in [*reads, again, post]] == [421] * 5
    assert all(r.json()["code"] == "host_not_allowed" and "runs" not in r.text for r in reads)
    assert own.status_code == 200
    assert runs_in_store(config) == []
    assert log.count("refused a request with 421 host_not_allowed") == 1


def test_allowed_hosts_and_origins_come_from_flags_or_the_environment(tmp_path: Path) -> None:
    simple_project(tmp_path)
    env = {"ROCKY_SERVE_ALLOWED_HOSTS": "rocky.internal, other.internal",
           "ROCKY_SERVE_ALLOWED_ORIGINS": "https://dash.internal"}
    with serving(tmp_path, env=env, name="env") as srv, srv.client() as c:
        by_env = c.get("/api/v1/health", headers={"Host": "other.internal"})
        origin = c.post("/api/v1/jobs/run", content=b"[]", headers={"Origin": "https://dash.internal"})
        assert "rocky.internal" in srv.log() and "https://dash.internal" in srv.log()
    flags = ("--allowed-host", "flag.internal", "--allowed-host", "Second.Internal")
    with serving(tmp_path, *flags, env=env, name="flags") as srv, srv.client() as c:
        by_flag = [c.get("/api/v1/health", headers={"Host": h}).status_code
                   for h in ("flag.internal", "second.internal", "rocky.internal")]
    assert by_env.status_code == 200 and origin.status_code == 400  # the route's own answer to []
    assert by_flag == [200, 200, 421]  # the flags replace the environment's list


def test_with_a_token_and_no_secret_the_webhook_refuses_unsigned_demands(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    args = ("--scheduler", "--poll-interval-seconds", "0.2")
    with serving(tmp_path, *args, env={"ROCKY_SERVE_TOKEN": "api-token"}) as srv, srv.client() as c, \
            srv.client(headers={"Authorization": "Bearer api-token"}) as api:
        wait_for(lambda: _ticked(api), what="the first tick")
        browser = c.post(HOOK, content=b"{}", headers=EVIL)
        unsigned = c.post(HOOK, content=b"{}")
        tick = api.get("/api/v1/schedule").json()["scheduler"]["last_tick"]["at"]
        # Ticks after the posts found nothing to run.
        wait_for(lambda: api.get("/api/v1/schedule").json()["scheduler"]["last_tick"]["at"] != tick,
                 what="a later tick")
        log = srv.log()
    assert browser.status_code == 403 and browser.json()["code"] == "cross_origin"
    assert unsigned.status_code == 404 and "a token is configured" in unsigned.json()["message"]
    assert spool_files(tmp_path) == [] and runs_in_store(config) == []
    assert "webhooks: off (ROCKY_WEBHOOK_SECRET required because a token is configured)" in log


def test_the_existing_clients_still_work(tmp_path: Path) -> None:
    # A webhook sender signing with X-Rocky-Signature, and the jobs API with a token: neither sends Origin.
    config = simple_project(tmp_path)
    env = {"ROCKY_SERVE_TOKEN": "api-token", "ROCKY_WEBHOOK_SECRET": "hook-secret"}
    with serving(tmp_path, "--scheduler", "--poll-interval-seconds", "3600", env=env) as srv, \
            srv.client(headers={"Authorization": "Bearer api-token"}) as c:
        body = b'{"event": "sync_complete"}'
        hook = c.post(HOOK, content=body, headers={**sign(body, "hook-secret"), "X-Rocky-Delivery": "e1"})
        run = c.post("/api/v1/jobs/run", json={"pipeline": "orders"})
        job = wait_job(c, run.json()["job_id"])
    assert hook.status_code == 202 and hook.json()["demand"] == "accepted"
    assert run.status_code == 202 and job["state"] == "succeeded"
    assert [r.status for r in runs_in_store(config)] == ["Success"]


def test_without_a_host_header_http_1_0_is_served_and_1_1_refused(tmp_path: Path) -> None:
    # No browser sends that (a rebinding page always sends its own name); old machine clients may.
    simple_project(tmp_path)
    with serving(tmp_path) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        answers = []
        for version in (b"1.0", b"1.1"):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(b"GET /api/v1/health HTTP/" + version + b"\r\nConnection: close\r\n\r\n")
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
                answers.append(answer)
    assert answers[0].startswith(b"HTTP/1.1 200 ")
    assert answers[1].startswith(b"HTTP/1.1 400 ")  # RFC 9112: a 1.1 request without Host is refused
    assert b'"an HTTP/1.1 request needs a Host header"' in answers[1]


def test_an_ipv6_loopback_server_answers_for_its_own_address(tmp_path: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    simple_project(tmp_path)
    with serving(tmp_path, "--host", "::1") as srv, srv.client() as c:
        own = c.get("/api/v1/health")
        name = c.get("/api/v1/health", headers={"Host": "localhost"})
        foreign = c.get("/api/v1/health", headers={"Host": "attacker.example"})
    assert srv.url.startswith("http://[::1]:")
    assert (own.status_code, name.status_code, foreign.status_code) == (200, 200, 421)
