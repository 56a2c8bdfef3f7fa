"""The HTTP surface: Bearer auth, JSON errors, CORS off, health, history, the OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.server.app import ROUTES
from rocky_engine.server.auth import token_matches
from rocky_engine.server.openapi import openapi_document
from tests.engine.schedule.kit import project_at, record_run, transformation
from tests.engine.server.kit import SECRET, InProcessServer, sign, simple_project

TOKEN = "tok-123"
PROTECTED = [
    ("GET", "/api/v1/openapi.json"),
    ("POST", "/api/v1/jobs/run"),
    ("GET", "/api/v1/jobs"),
    ("GET", "/api/v1/jobs/abc"),
    ("GET", "/api/v1/runs"),
    ("GET", "/api/v1/schedule"),
    ("GET", "/api/v1/schedule/spool"),
    ("GET", "/metrics"),
    ("GET", "/no/such/route"),
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return simple_project(tmp_path)


@pytest.fixture
def secured(config: Path) -> Iterator[InProcessServer]:
    with InProcessServer(config, token=TOKEN, scheduler=True, webhook_secrets=(SECRET,),
                         poll_interval_seconds=3600) as srv:
        yield srv


@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_every_route_but_health_and_webhooks_needs_the_token(
    secured: InProcessServer, method: str, path: str
) -> None:
    with secured.client() as c:
        missing = c.request(method, path)
        wrong = c.request(method, path, headers={"Authorization": "Bearer nope"})
        basic = c.request(method, path, headers={"Authorization": f"Basic {TOKEN}"})
    for r in (missing, wrong, basic):
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        assert r.json()["code"] == "unauthorized"
    assert missing.json()["message"].startswith("missing bearer token")
    assert wrong.json()["message"] == "invalid bearer token"
    assert 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]


def test_the_right_token_opens_the_api(secured: InProcessServer) -> None:
    with secured.client(headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        assert c.get("/api/v1/runs").status_code == 200
        assert c.get("/metrics").status_code == 200
        assert c.get("/api/v1/openapi.json").status_code == 200


def test_health_and_webhook_need_no_token(secured: InProcessServer) -> None:
    with secured.client() as c:
        health = c.get("/api/v1/health")
        hook = c.post("/api/v1/hooks/trigger/orders", content=b"", headers=sign(b""))
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "version": health.json()["version"], "scheduler": True,
                             "draining": False}
    assert hook.status_code == 202


def test_token_comparison() -> None:
    assert token_matches(f"Bearer {TOKEN}", TOKEN)
    assert token_matches(f"bearer  {TOKEN} ", TOKEN)
    assert not token_matches(f"Bearer {TOKEN}x", TOKEN)
    assert not token_matches("Bearer", TOKEN)
    assert not token_matches(None, TOKEN)
    assert not token_matches("Bearer ünïcode", TOKEN)


def test_unknown_routes_and_methods_get_json_errors(config: Path) -> None:
    with InProcessServer(config) as srv, srv.client() as c:
        missing = c.get("/api/v1/nope")
        wrong_method = c.delete("/api/v1/health")
    assert missing.status_code == 404
    assert missing.json() == {"code": "not_found", "message": "no route GET /api/v1/nope"}
    assert wrong_method.status_code == 405 and wrong_method.json()["code"] == "method_not_allowed"
    assert "GET" in wrong_method.headers["Allow"]


def test_cors_is_off(config: Path) -> None:
    origin = {"Origin": "https://evil.example"}
    with InProcessServer(config) as srv, srv.client() as c:
        simple = c.get("/api/v1/health", headers=origin)
        preflight = c.options("/api/v1/jobs/run", headers={
            **origin, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in simple.headers
    assert "access-control-allow-origin" not in preflight.headers
    assert preflight.status_code == 405


def test_health_reports_draining_with_503(config: Path) -> None:
    with InProcessServer(config) as srv, srv.client() as c:
        srv.ctx.draining.set()
        r = c.get("/api/v1/health")
    assert r.status_code == 503 and r.json()["status"] == "draining" and r.json()["draining"] is True


def test_runs_lists_history_newest_first_with_limit_and_since(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("orders"))
    t0 = datetime(2026, 5, 1, tzinfo=UTC)
    ids = [record_run(project, "orders", "Success", t0 + timedelta(days=i), submission_id=f"s{i}")
           for i in range(3)]
    with InProcessServer(project.config.path) as srv, srv.client() as c:
        doc = c.get("/api/v1/runs").json()
        limited = c.get("/api/v1/runs", params={"limit": 1}).json()
        since = c.get("/api/v1/runs", params={"since": "2026-05-02"}).json()
        bad_limit = c.get("/api/v1/runs", params={"limit": 0})
        bad_since = c.get("/api/v1/runs", params={"since": "yesterday"})
    assert doc["command"] == "history"
    assert [r["run_id"] for r in doc["runs"]] == ids[::-1]
    assert doc["runs"][0]["submission_id"] == "s2" and doc["runs"][0]["status"] == "Success"
    assert [r["run_id"] for r in limited["runs"]] == [ids[2]]
    assert [r["run_id"] for r in since["runs"]] == ids[:0:-1]
    assert bad_limit.status_code == 400
    assert bad_limit.json()["message"] == "query parameter 'limit' must be between 1 and 1000, got 0"
    assert bad_since.status_code == 400 and "invalid --since 'yesterday'" in bad_since.json()["message"]


def test_runs_on_a_fresh_project_is_empty(config: Path) -> None:
    with InProcessServer(config) as srv, srv.client() as c:
        assert c.get("/api/v1/runs").json()["runs"] == []


def test_openapi_describes_every_route_and_only_those(config: Path) -> None:
    with InProcessServer(config) as srv, srv.client() as c:
        served = c.get("/api/v1/openapi.json").json()
    assert served == openapi_document()
    documented = {(m.upper(), path) for path, ops in served["paths"].items() for m in ops}
    routed = {(m, r.path) for r in ROUTES for m in (r.methods or ()) if m != "HEAD"}
    assert documented == routed
    assert served["openapi"].startswith("3.")
    for (method, path) in documented:
        op = served["paths"][path][method.lower()]
        assert op["summary"] and op["responses"], (method, path)
        if path not in ("/api/v1/health", "/api/v1/hooks/trigger/{pipeline}"):
            assert "401" in op["responses"], path
