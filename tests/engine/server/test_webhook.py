"""Webhook ingress over real HTTP: every status code, in the order the seed gives, and the spool it writes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.schedule.spool import consume, list_demands, spool_dir_of
from rocky_engine.server.signatures import standard_signature
from tests.engine.server.kit import SECRET, InProcessServer, sign, simple_project, spool_files

HOOK = "/api/v1/hooks/trigger/orders"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return simple_project(tmp_path)


@pytest.fixture
def signed(config: Path) -> Iterator[InProcessServer]:
    # A poll interval of an hour: the first tick runs at startup, then nothing consumes the spool.
    with InProcessServer(
        config, scheduler=True, webhook_secrets=(SECRET,), poll_interval_seconds=3600
    ) as srv:
        srv.first_tick()
        yield srv


def test_404_without_the_scheduler(config: Path) -> None:
    with InProcessServer(config, scheduler=False, webhook_secrets=(SECRET,)) as srv, srv.client() as c:
        r = c.post(HOOK, content=b"", headers=sign(b""))
    assert r.status_code == 404
    assert r.json() == {
        "code": "not_found",
        "message": "webhook ingress is off: it runs only under `rocky serve --scheduler`",
    }
    assert spool_files(config.parent) == []


def test_404_without_a_secret_off_loopback(config: Path) -> None:
    # Bound to 127.0.0.1 for the test, but configured as a public bind: fail closed without a secret.
    srv = InProcessServer(config, scheduler=True, host="0.0.0.0", token="t", poll_interval_seconds=3600)
    with srv, srv.client() as c:
        r = c.post(HOOK, content=b"")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert "ROCKY_WEBHOOK_SECRET" in r.json()["message"]


def test_loopback_without_a_secret_accepts_unsigned(config: Path) -> None:
    with InProcessServer(config, scheduler=True, poll_interval_seconds=3600) as srv, srv.client() as c:
        r = c.post(HOOK, content=b"{}")
    assert r.status_code == 202 and r.json()["demand"] == "accepted"
    [path] = spool_files(config.parent)
    assert json.loads(path.read_text())["demand_uid"] == r.json()["demand_uid"]


def test_signed_request_is_spooled_durably_and_answered_202(signed: InProcessServer, config: Path) -> None:
    body = b'{"event": "sync_complete"}'
    with signed.client() as c:
        r = c.post(HOOK, content=body, headers={**sign(body), "X-Rocky-Delivery": "evt-1"})
    assert r.status_code == 202
    doc = r.json()
    assert doc["demand"] == "accepted" and len(doc["demand_uid"]) == 32
    [demand] = list_demands(spool_dir_of(config.parent / ".rocky")).demands
    assert (demand.demand_uid, demand.pipeline, demand.delivery_id) == (doc["demand_uid"], "orders", "evt-1")
    assert body.decode() not in demand.path.read_text()  # the body itself is never stored


def test_sha256_prefixed_signature_is_accepted(signed: InProcessServer) -> None:
    body = b"x"
    with signed.client() as c:
        prefixed = "sha256=" + sign(body)["X-Rocky-Signature"]
        r = c.post(HOOK, content=body, headers={"X-Rocky-Signature": prefixed})
    assert r.status_code == 202


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing signature: send X-Rocky-Signature"),
        ({"X-Rocky-Signature": "00" * 32}, "X-Rocky-Signature does not match the body"),
        ({"X-Rocky-Signature": "not hex at all"}, "X-Rocky-Signature does not match the body"),
    ],
)
def test_401_on_a_missing_or_wrong_signature(
    signed: InProcessServer, config: Path, headers: dict[str, str], message: str
) -> None:
    with signed.client() as c:
        r = c.post(HOOK, content=b"payload", headers=headers)
    assert r.status_code == 401
    assert r.json()["code"] == "invalid_signature" and r.json()["message"].startswith(message)
    assert spool_files(config.parent) == []


def test_a_signature_for_another_body_is_refused(signed: InProcessServer) -> None:
    with signed.client() as c:
        r = c.post(HOOK, content=b"tampered", headers=sign(b"original"))
    assert r.status_code == 401


def test_secret_rotation_any_listed_secret_verifies(config: Path) -> None:
    with InProcessServer(config, scheduler=True, webhook_secrets=("old-secret", "new-secret"),
                         poll_interval_seconds=3600) as srv, srv.client() as c:
        old = c.post(HOOK, content=b"a", headers=sign(b"a", "old-secret"))
        new = c.post(HOOK, content=b"b", headers=sign(b"b", "new-secret"))
        other = c.post(HOOK, content=b"c", headers=sign(b"c", "retired-secret"))
    assert (old.status_code, new.status_code, other.status_code) == (202, 202, 401)


def test_unknown_pipeline_is_404_only_after_the_signature(signed: InProcessServer, config: Path) -> None:
    with signed.client() as c:
        unsigned = c.post("/api/v1/hooks/trigger/nope", content=b"")
        signed_unknown = c.post("/api/v1/hooks/trigger/nope", content=b"", headers=sign(b""))
    # Without a valid signature the caller learns nothing about which pipelines exist.
    assert unsigned.status_code == 401
    assert signed_unknown.status_code == 404
    assert signed_unknown.json() == {
        "code": "pipeline_not_found", "message": "no such pipeline in this project's rocky.toml",
    }
    assert spool_files(config.parent) == []


def test_413_for_a_body_over_one_mib(signed: InProcessServer, config: Path) -> None:
    limit = 1024 * 1024
    big = b"x" * (limit + 1)
    with signed.client() as c:
        r = c.post(HOOK, content=big, headers=sign(big))
        ok = c.post(HOOK, content=big[:limit], headers=sign(big[:limit]))
    assert r.status_code == 413 and r.json()["code"] == "payload_too_large"
    assert ok.status_code == 202
    assert len(spool_files(config.parent)) == 1


def test_413_when_the_body_streams_past_the_limit_without_a_length(signed: InProcessServer) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(17):
            yield b"y" * 65536

    with signed.client() as c:
        r = c.post(HOOK, content=chunks(), headers={"X-Rocky-Signature": "00"})
    assert r.status_code == 413


def test_429_with_retry_after_writes_nothing(config: Path) -> None:
    with InProcessServer(config, scheduler=True, webhook_secrets=(SECRET,), poll_interval_seconds=3600,
                         webhook_rate_per_second=0.01, webhook_burst=2) as srv, srv.client() as c:
        answers = []
        for i in range(5):
            body = f"event-{i}".encode()
            answers.append(c.post(HOOK, content=body, headers=sign(body)))
    assert [a.status_code for a in answers] == [202, 202, 429, 429, 429]
    limited = answers[2]
    assert limited.json()["code"] == "rate_limited"
    assert int(limited.headers["Retry-After"]) >= 1
    assert len(spool_files(config.parent)) == 2


def test_bad_signatures_are_refused_before_the_rate_limit_spends_a_token(config: Path) -> None:
    with InProcessServer(config, scheduler=True, webhook_secrets=(SECRET,), poll_interval_seconds=3600,
                         webhook_rate_per_second=0.01, webhook_burst=1) as srv, srv.client() as c:
        bad = [c.post(HOOK, content=b"z", headers={"X-Rocky-Signature": "ab"}) for _ in range(3)]
        good = c.post(HOOK, content=b"z", headers=sign(b"z"))
    assert [b.status_code for b in bad] == [401, 401, 401]
    assert good.status_code == 202


def test_redelivery_with_the_same_delivery_id_is_a_duplicate(signed: InProcessServer, config: Path) -> None:
    with signed.client() as c:
        first = c.post(HOOK, content=b"one", headers={**sign(b"one"), "X-Rocky-Delivery": "evt-7"})
        again = c.post(HOOK, content=b"two", headers={**sign(b"two"), "X-Rocky-Delivery": "evt-7"})
    assert first.json()["demand"] == "accepted"
    assert again.status_code == 202 and again.json() == {"demand": "duplicate"}
    assert len(spool_files(config.parent)) == 1


def test_delivery_id_dedupes_after_consumption_but_a_body_hash_does_not(
    signed: InProcessServer, config: Path
) -> None:
    spool = spool_dir_of(config.parent / ".rocky")
    with signed.client() as c:
        c.post(HOOK, content=b"a", headers={**sign(b"a"), "X-Rocky-Delivery": "evt-9"})
        c.post(HOOK, content=b"b", headers=sign(b"b"))
        queued_dup = c.post(HOOK, content=b"b", headers=sign(b"b"))
        for demand in list_demands(spool).demands:  # what a tick does once the claim is committed
            consume(spool, demand, datetime.now(UTC))
        redelivered = c.post(HOOK, content=b"a", headers={**sign(b"a"), "X-Rocky-Delivery": "evt-9"})
        same_body = c.post(HOOK, content=b"b", headers=sign(b"b"))
    assert queued_dup.json() == {"demand": "duplicate"}
    assert redelivered.json() == {"demand": "duplicate"}
    assert same_body.json()["demand"] == "accepted"


@pytest.mark.parametrize("delivery", ["has space", "x" * 257, "tab\tinside"])
def test_400_for_an_unusable_delivery_id(signed: InProcessServer, delivery: str) -> None:
    with signed.client() as c:
        r = c.post(HOOK, content=b"", headers={**sign(b""), "X-Rocky-Delivery": delivery})
    assert r.status_code == 400 and r.json()["code"] == "bad_request"


def test_503_when_the_spool_cannot_be_written(signed: InProcessServer, config: Path) -> None:
    dot = config.parent / ".rocky"
    dot.mkdir(exist_ok=True)
    (dot / "pending-demands").write_text("not a directory")
    with signed.client() as c:
        r = c.post(HOOK, content=b"", headers=sign(b""))
    assert r.status_code == 503 and r.json()["code"] == "spool_unavailable"
    assert "cannot write to the webhook spool" in r.json()["message"]


# ---------------------------------------------------------------------- Standard Webhooks


def _sw_headers(body: bytes, *, webhook_id: str = "msg_1", at: float | None = None,
                secret: str = SECRET) -> dict[str, str]:
    ts = str(int(time.time() if at is None else at))
    return {
        "webhook-id": webhook_id, "webhook-timestamp": ts,
        "webhook-signature": standard_signature(secret, webhook_id, ts, body),
    }


def test_standard_webhooks_request_is_accepted_and_its_id_dedupes(
    signed: InProcessServer, config: Path
) -> None:
    body = b'{"type": "sync.done"}'
    with signed.client() as c:
        first = c.post(HOOK, content=body, headers=_sw_headers(body))
        retried = c.post(HOOK, content=body, headers=_sw_headers(body))
    assert first.status_code == 202 and first.json()["demand"] == "accepted"
    assert retried.json() == {"demand": "duplicate"}
    [demand] = list_demands(spool_dir_of(config.parent / ".rocky")).demands
    assert demand.delivery_id == "msg_1"


def test_standard_webhooks_several_signatures_and_a_whsec_secret(config: Path) -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b"{}"
    headers = _sw_headers(body, secret=secret)
    headers["webhook-signature"] = "v1,bm90IGl0 " + headers["webhook-signature"]
    srv = InProcessServer(config, scheduler=True, webhook_secrets=(secret,), poll_interval_seconds=3600)
    with srv, srv.client() as c:
        r = c.post(HOOK, content=body, headers=headers)
    assert r.status_code == 202


@pytest.mark.parametrize("skew", [-301, 301, -3600])
def test_a_replayed_standard_webhook_outside_the_tolerance_is_refused(
    signed: InProcessServer, config: Path, skew: int
) -> None:
    body = b"{}"
    with signed.client() as c:
        r = c.post(HOOK, content=body, headers=_sw_headers(body, at=time.time() + skew))
    assert r.status_code == 401
    assert "tolerance 300 s" in r.json()["message"]
    assert spool_files(config.parent) == []


def test_standard_webhooks_wrong_signature_or_missing_header(signed: InProcessServer) -> None:
    body = b"{}"
    wrong = _sw_headers(body)
    wrong["webhook-signature"] = "v1,AAAA"
    partial = _sw_headers(body)
    del partial["webhook-timestamp"]
    with signed.client() as c:
        r1 = c.post(HOOK, content=body, headers=wrong)
        r2 = c.post(HOOK, content=body, headers=partial)
        r3 = c.post(HOOK, content=body, headers={**_sw_headers(body), "webhook-timestamp": "soon"})
    assert r1.status_code == 401 and r1.json()["message"] == "webhook-signature does not match the request"
    assert r2.status_code == 401 and "needs all three headers" in r2.json()["message"]
    assert r3.status_code == 401 and "not an integer" in r3.json()["message"]


# ---------------------------------------------------------------------- odd names and traversal


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "pending-demands" not in p.parts}


@pytest.mark.parametrize(
    "raw_path",
    [
        "/api/v1/hooks/trigger/%2E%2E",
        "/api/v1/hooks/trigger/..%2F..%2Fetc%2Fpasswd",
        "/api/v1/hooks/trigger/..%2Frocky.toml",
        "/api/v1/hooks/trigger/orders%00",
        "/api/v1/hooks/trigger/%2Ftmp%2Fx",
        "/api/v1/hooks/trigger/.rocky",
        "/api/v1/hooks/trigger/" + "a" * 5000,
        "/api/v1/hooks/trigger/%C3%A9t%C3%A9",
        "/api/v1/hooks/trigger/orders%20",
        "/api/v1/hooks/trigger/-orders",
    ],
)
def test_odd_pipeline_names_never_touch_the_filesystem(
    signed: InProcessServer, config: Path, tmp_path: Path, raw_path: str
) -> None:
    import http.client

    root = tmp_path.parent
    before = _tree(root)
    conn = http.client.HTTPConnection("127.0.0.1", int(signed.url.rsplit(":", 1)[1]), timeout=10)
    body = b""
    conn.request("POST", raw_path, body=body, headers=sign(body))
    response = conn.getresponse()
    status = response.status
    doc = json.loads(response.read() or b"{}")
    conn.close()
    assert status == 404, (raw_path, doc)
    assert doc["code"] in ("pipeline_not_found", "not_found")
    assert _tree(root) == before
    assert spool_files(config.parent) == []


def test_the_spool_holds_only_digest_named_files(signed: InProcessServer, config: Path) -> None:
    with signed.client() as c:
        c.post(HOOK, content=b"1", headers={**sign(b"1"), "X-Rocky-Delivery": "../../escape"})
    names = [p.name for p in spool_files(config.parent)]
    assert len(names) == 1 and names[0].startswith("d-") and "/" not in names[0] and ".." not in names[0]


def test_demand_accepted_at_is_now(signed: InProcessServer, config: Path) -> None:
    with signed.client() as c:
        c.post(HOOK, content=b"", headers=sign(b""))
    [demand] = list_demands(spool_dir_of(config.parent / ".rocky")).demands
    assert abs(demand.accepted_at - datetime.now(UTC)) < timedelta(seconds=10)
