"""The request guard over real HTTP: the Host allow-list, cross-site browser refusals, and the browser rule
of the unsigned webhook exception (issue 18)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocky_engine.server.app import ROUTES
from rocky_engine.server.guard import RequestPolicy, host_name, normalize_allowed_host, normalize_origin
from rocky_engine.server.settings import ServerSettings
from tests.engine.server.kit import SECRET, InProcessServer, runs_in_store, sign, simple_project, spool_files

HOOK = "/api/v1/hooks/trigger/orders"
RUN = "/api/v1/jobs/run"
#: what a page on http://evil.example sends with fetch(..., {method: "POST", mode: "no-cors"})
EVIL = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}
#: a body the route refuses with 400: proof that the guard let the request through, without a run
NOT_AN_OBJECT = b"[]"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return simple_project(tmp_path)


@pytest.fixture
def server(config: Path) -> Iterator[InProcessServer]:
    with InProcessServer(config, allowed_origins=("http://localhost:3000",),
                         allowed_hosts=("rocky.example.com",)) as srv:
        yield srv


def _netloc(srv: InProcessServer) -> str:
    return srv.url.removeprefix("http://")


# ---------------------------------------------------------------------- Host


def _route_requests() -> list[tuple[str, str]]:
    out = []
    for route in ROUTES:
        path = route.path.replace("{job_id}", "abc").replace("{pipeline}", "orders")
        out += [(method, path) for method in sorted(route.methods or ()) if method != "HEAD"]
    return out


@pytest.mark.parametrize(("method", "path"), _route_requests())
def test_a_foreign_host_is_421_on_every_route(server: InProcessServer, method: str, path: str) -> None:
    port = server.url.rsplit(":", 1)[1]
    with server.client() as c:
        r = c.request(method, path, headers={"Host": f"rebind.evil.example:{port}"}, content=b"{}")
    assert r.status_code == 421
    assert r.json() == {
        "code": "host_not_allowed",
        "message": f"this server does not answer for Host 'rebind.evil.example:{port}'; address it as "
        "localhost or by its IP address, or start it with --allowed-host NAME (ROCKY_SERVE_ALLOWED_HOSTS)",
    }
    assert r.headers["connection"] == "close"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST.", "rocky.example.com",
                                  "rocky.example.com:443", "Rocky.Example.Com"])
def test_the_servers_own_names_are_accepted(server: InProcessServer, host: str) -> None:
    port = server.url.rsplit(":", 1)[1]
    with server.client() as c:
        with_port = c.get("/api/v1/jobs", headers={"Host": f"{host}:{port}" if ":" not in host else host})
        bare = c.get("/api/v1/jobs", headers={"Host": host})
    assert with_port.status_code == 200 and bare.status_code == 200


@pytest.mark.parametrize("host", ["sub.rocky.example.com", "rocky.example.com.evil.example", "127.0.0.2",
                                  "0.0.0.0", "evil.example@127.0.0.1", "[::1]", "localhost.evil.example"])
def test_near_misses_are_refused(server: InProcessServer, host: str) -> None:
    with server.client() as c:
        assert c.get("/api/v1/health", headers={"Host": host}).status_code == 421


def test_the_host_check_runs_before_the_token_check(config: Path) -> None:
    with InProcessServer(config, token="tok") as srv, srv.client() as c:
        r = c.get("/api/v1/runs", headers={"Host": "evil.example"})
    assert r.status_code == 421 and r.json()["code"] == "host_not_allowed"


def test_a_wildcard_bind_accepts_the_address_a_connection_arrived_on(config: Path) -> None:
    # Configured as 0.0.0.0 (the test socket is 127.0.0.1): the local address of the connection is the
    # bound address a client can use; "0.0.0.0" itself is no name of this server.
    with InProcessServer(config, host="0.0.0.0", token="t") as srv, srv.client() as c:
        ok = c.get("/api/v1/health", headers={"Host": _netloc(srv)})
        wildcard = c.get("/api/v1/health", headers={"Host": "0.0.0.0"})
        other = c.get("/api/v1/health", headers={"Host": "10.1.2.3"})
    assert ok.status_code == 200
    assert wildcard.status_code == 421 and other.status_code == 421


def test_refusals_are_counted_in_the_metrics(server: InProcessServer) -> None:
    with server.client() as c:
        c.get("/api/v1/health", headers={"Host": "evil.example"})
        c.get("/api/v1/health", headers={"Host": "evil2.example"})
        c.post(RUN, content=b"{}", headers=EVIL)
        text = c.get("/metrics").text
    assert 'rocky_http_refused_total{reason="host_not_allowed"} 2' in text
    assert 'rocky_http_refused_total{reason="cross_origin"} 1' in text


# ---------------------------------------------------------------------- Origin / Sec-Fetch-Site


@pytest.mark.parametrize(
    "headers",
    [
        EVIL,
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port of localhost is the same site, not the same origin
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Origin": "http://localhost:3001"},
        {"Origin": "https://localhost:3000"},
    ],
)
def test_a_browser_post_from_another_origin_is_403_before_any_work(
    server: InProcessServer, config: Path, headers: dict[str, str]
) -> None:
    with server.client() as c:
        run = c.post(RUN, content=b'{"pipeline": "orders"}', headers=headers)
        jobs = c.get("/api/v1/jobs").json()["jobs"]
    assert run.status_code == 403 and run.json()["code"] == "cross_origin"
    assert run.headers["connection"] == "close"
    assert jobs == [] and runs_in_store(config) == []


def test_the_cross_origin_messages(server: InProcessServer) -> None:
    with server.client() as c:
        origin = c.post(RUN, content=b"{}", headers=EVIL).json()["message"]
        fetch = c.post(RUN, content=b"{}", headers={"Sec-Fetch-Site": "cross-site"}).json()["message"]
    assert origin == ("refusing a POST sent by a page of another origin ('http://evil.example'); a page that "
                      "should use the API needs --allowed-origin ORIGIN (ROCKY_SERVE_ALLOWED_ORIGINS)")
    assert fetch == ("refusing a POST a browser sent for another site (Sec-Fetch-Site: cross-site); API "
                     "clients send no Origin or Sec-Fetch-Site header")


@pytest.mark.parametrize(
    "headers",
    [
        {},  # curl, Dagster, webhook senders
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},
        {"Origin": "http://localhost:3000"},  # --allowed-origin
        {"Origin": "HTTP://LOCALHOST:3000", "Sec-Fetch-Site": "cross-site"},
    ],
)
def test_machine_clients_and_allowed_origins_pass(server: InProcessServer, headers: dict[str, str]) -> None:
    with server.client() as c:
        r = c.post(RUN, content=NOT_AN_OBJECT, headers=headers)
    assert r.status_code == 400 and r.json()["code"] == "bad_request"  # the route itself answered


def test_the_servers_own_page_may_post(server: InProcessServer) -> None:
    with server.client() as c:
        own = c.post(RUN, content=NOT_AN_OBJECT, headers={"Origin": server.url})
        by_name = c.post(RUN, content=NOT_AN_OBJECT, headers={
            "Host": "rocky.example.com", "Origin": "https://rocky.example.com"})  # behind a TLS proxy
        other_port = c.post(RUN, content=NOT_AN_OBJECT, headers={"Origin": "http://127.0.0.1:1"})
    assert own.status_code == 400 and by_name.status_code == 400
    assert other_port.status_code == 403


def test_reads_are_not_refused_for_their_origin(server: InProcessServer) -> None:
    # A cross-origin page cannot read the answer (no CORS headers), and GETs change nothing.
    with server.client() as c:
        r = c.get("/api/v1/jobs", headers=EVIL)
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


# ---------------------------------------------------------------------- the webhook's unsigned exception


@pytest.mark.parametrize("headers", [{"Origin": "OWN"}, {"Sec-Fetch-Site": "same-origin"}])
def test_an_unsigned_webhook_from_a_browser_is_refused_even_from_the_own_origin(
    config: Path, headers: dict[str, str]
) -> None:
    with InProcessServer(config, scheduler=True, poll_interval_seconds=3600) as srv, srv.client() as c:
        sent = {k: (srv.url if v == "OWN" else v) for k, v in headers.items()}
        r = c.post(HOOK, content=b"{}", headers=sent)
        plain = c.post(HOOK, content=b"{}")
    assert r.status_code == 403
    assert r.json() == {
        "code": "signature_required",
        "message": "an unsigned webhook is accepted only from a client that sends no Origin or "
        "Sec-Fetch-Site header (never from a web page); set ROCKY_WEBHOOK_SECRET and sign the request",
    }
    assert plain.status_code == 202  # the local-development exception itself stays
    assert len(spool_files(config.parent)) == 1


def test_with_a_token_the_webhook_route_needs_a_secret_even_on_loopback(config: Path) -> None:
    srv = InProcessServer(config, scheduler=True, token="tok", poll_interval_seconds=3600)
    with srv, srv.client() as c:
        unsigned = c.post(HOOK, content=b"{}")
        with_token = c.post(HOOK, content=b"{}", headers={"Authorization": "Bearer tok"})
    for r in (unsigned, with_token):
        assert r.status_code == 404
        assert r.json() == {
            "code": "not_found",
            "message": "webhook ingress is off: a token is configured, so the route needs "
            "ROCKY_WEBHOOK_SECRET (unsigned demands are refused)",
        }
    assert spool_files(config.parent) == []


def test_a_signed_webhook_from_an_allowed_origin_is_judged_by_its_signature(config: Path) -> None:
    srv = InProcessServer(config, scheduler=True, webhook_secrets=(SECRET,), poll_interval_seconds=3600,
                          allowed_origins=("https://hooks.example",))
    with srv, srv.client() as c:
        origin = {"Origin": "https://hooks.example"}
        unsigned = c.post(HOOK, content=b"{}", headers=origin)
        signed = c.post(HOOK, content=b"{}", headers={**origin, **sign(b"{}")})
    assert unsigned.status_code == 401 and signed.status_code == 202


# ---------------------------------------------------------------------- names


def test_host_name() -> None:
    assert host_name("LocalHost.:8080") == "localhost"
    assert host_name("[::1]:8080") == "::1"
    assert host_name("[::1]") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"
    assert host_name("name:notaport") == "name:notaport"
    assert host_name("::1") == "::1" and host_name("fe80::1:2") == "fe80::1:2"  # socket addresses


def test_an_ipv6_loopback_server_accepts_its_bracketed_address(config: Path) -> None:
    policy = RequestPolicy(ServerSettings(config_path=config, host="::1"))
    assert policy.host_refusal("[::1]:8080", "::1", "1.1") is None
    assert policy.host_refusal("[::1]", None, "1.1") is None  # the --host given
    assert policy.host_refusal("[::2]:8080", "::1", "1.1") is not None


def test_allowed_host_and_origin_values() -> None:
    assert normalize_allowed_host(" Rocky.Example.COM ") == "rocky.example.com"
    assert normalize_allowed_host("[::1]") == "::1"
    assert normalize_allowed_host("10.0.0.5") == "10.0.0.5"
    for bad in ("", "https://rocky.example.com", "rocky.example.com:443", "a/b", "a b", "user@host"):
        with pytest.raises(ValueError, match="--allowed-host takes a host name or IP address"):
            normalize_allowed_host(bad)
    assert normalize_origin("HTTPS://Dash.Example.com") == "https://dash.example.com"
    assert normalize_origin("http://localhost:3000/") == "http://localhost:3000"
    for bad in ("dash.example.com", "ftp://x", "https://x/path", "https://x?q", "https://u@x", "null",
                "http://x:99999", "https://"):
        with pytest.raises(ValueError, match="--allowed-origin takes an origin like"):
            normalize_origin(bad)
