"""Webhooks delivered to a local receiver on 127.0.0.1: signatures, preset bodies, retries, failures."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.config.hooks import WebhookHook
from rocky_engine.hooks.event import HookEvent
from rocky_engine.hooks.webhooks import deliver_webhook, receiver_name, sign
from tests.engine.hooks.kit import BAD_SQL, GOOD_SQL, Received, make_project, receiver, run_in_process

SECRET = "s3cr3t-hmac-key"


def _verify(request: Received, secret: str = SECRET) -> None:
    expected = "sha256=" + hmac.new(secret.encode(), request.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(request.headers["X-Rocky-Signature"], expected)


def _event(**overrides: Any) -> HookEvent:
    fields: dict[str, Any] = {
        "event": "pipeline_error", "run_id": "run-20260502-030000-000", "pipeline": "orders",
        "timestamp": "2026-05-02T03:00:00.000Z", "error": 'model "fct" failed: <boom> & more',
        "duration_ms": 1500, "metadata": {"status": "Failure", "exit_code": 1},
    }
    fields.update(overrides)
    return HookEvent(**fields)


def _hook(url: str, **overrides: Any) -> WebhookHook:
    return WebhookHook.model_validate({"url": url, "retry_delay_ms": 10, **overrides})


def _webhook_toml(url: str, event: str = "pipeline_error", **keys: Any) -> str:
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    return f'\n[hook.webhooks.on_{event}]\nurl = "{url}"\n{body}'


def test_slack_webhook_on_a_failed_run_is_signed_and_block_kit_shaped(tmp_path: Path) -> None:
    with receiver() as rx:
        config = make_project(tmp_path, {"bad": BAD_SQL},
                              extra_toml=_webhook_toml(rx.url, preset="slack", secret=SECRET))
        out = run_in_process(config)
    assert out.status == "Failure"
    assert len(rx.requests) == 1
    request = rx.requests[0]
    assert request.method == "POST"
    assert request.path == "/hook/T0KEN-SECRET-PATH"
    _verify(request)
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Rocky-Event"] == "pipeline_error"
    body = request.json
    assert body["text"].startswith(":red_circle: Rocky pipeline error: pipeline models (Failure)")
    kinds = [block["type"] for block in body["blocks"]]
    assert kinds[:2] == ["header", "section"] and kinds[-1] == "context"
    fields = {f["text"].split("\n")[0]: f["text"].split("\n")[1] for f in body["blocks"][1]["fields"]}
    assert fields["*Pipeline*"] == "models"
    assert fields["*Run*"] == out.run_id
    assert "no_such_column" in body["blocks"][2]["text"]["text"]


def test_signature_covers_the_exact_body() -> None:
    body = b'{"a":1}'
    assert sign("k", body) == "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()
    assert sign("k", body) != sign("k", b'{"a": 1}')


def test_teams_preset_is_an_adaptive_card() -> None:
    with receiver() as rx:
        outcome = deliver_webhook(_hook(rx.url, preset="teams", secret=SECRET), _event())
    assert outcome.ok and outcome.attempts == 1 and outcome.status_code == 200
    _verify(rx.requests[0])
    body = rx.requests[0].json
    assert body["type"] == "message"
    attachment = body["attachments"][0]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    assert card["body"][0]["color"] == "Attention"
    facts = {f["title"]: f["value"] for f in card["body"][1]["facts"]}
    assert facts["Pipeline"] == "orders" and facts["Status"] == "Failure"
    assert card["body"][2]["text"] == 'model "fct" failed: <boom> & more'


def test_pagerduty_preset_moves_the_routing_key_into_an_events_v2_body() -> None:
    with receiver() as rx:
        hook = _hook(rx.url, preset="pagerduty", headers={"X-Routing-Key": "R0UTING-KEY"})
        outcome = deliver_webhook(hook, _event(model="fct"))
    assert outcome.ok
    request = rx.requests[0]
    assert "X-Routing-Key" not in request.headers and "x-routing-key" not in request.headers
    body = request.json
    assert body["routing_key"] == "R0UTING-KEY"
    assert body["event_action"] == "trigger"
    assert body["dedup_key"] == "rocky/orders/fct"
    payload = body["payload"]
    assert payload["severity"] == "error"
    assert payload["component"] == "orders" and payload["class"] == "pipeline_error"
    assert payload["summary"].startswith("Rocky pipeline error: pipeline orders, model fct (Failure): model")
    assert payload["custom_details"]["run_id"] == "run-20260502-030000-000"


def test_pagerduty_resolves_on_a_successful_completion() -> None:
    with receiver() as rx:
        hook = _hook(rx.url, preset="pagerduty", headers={"routing_key": "K"})
        deliver_webhook(hook, _event(event="pipeline_complete", error=None, metadata={"status": "Success"}))
    assert rx.requests[0].json == {"routing_key": "K", "event_action": "resolve", "dedup_key": "rocky/orders"}


def test_pagerduty_without_a_routing_key_is_not_sent() -> None:
    with receiver() as rx:
        outcome = deliver_webhook(_hook(rx.url, preset="pagerduty"), _event())
    assert not outcome.ok and outcome.attempts == 0
    assert outcome.error is not None and "needs a routing key" in outcome.error
    assert rx.requests == []


def test_datadog_preset_is_an_event() -> None:
    with receiver() as rx:
        deliver_webhook(_hook(rx.url, preset="datadog", headers={"DD-API-KEY": "dd"}), _event())
    request = rx.requests[0]
    assert request.headers["DD-API-KEY"] == "dd"
    body = request.json
    assert body["alert_type"] == "error"
    assert body["title"].startswith("Rocky pipeline error: pipeline orders")
    assert "pipeline:orders" in body["tags"] and "event:pipeline_error" in body["tags"]
    assert "Error: model \"fct\" failed" in body["text"]


def test_generic_preset_posts_the_raw_context() -> None:
    with receiver() as rx:
        deliver_webhook(_hook(rx.url), _event())
    assert rx.requests[0].json == _event().payload()


def test_body_template_placeholders_are_json_escaped_in_a_json_template() -> None:
    template = '{"msg": "{{ pipeline }} failed: {{ error }}", "status": "{{ metadata.status }}", ' \
               '"missing": "{{ model }}", "ctx": {{ context }}}'
    with receiver() as rx:
        deliver_webhook(_hook(rx.url, preset="slack", body_template=template, method="PUT"), _event())
    request = rx.requests[0]
    assert request.method == "PUT"
    assert request.headers["Content-Type"] == "application/json"
    body = request.json
    assert body["msg"] == 'orders failed: model "fct" failed: <boom> & more'
    assert body["status"] == "Failure" and body["missing"] == ""
    assert body["ctx"]["event"] == "pipeline_error"


def test_a_plain_text_template_is_sent_as_text() -> None:
    with receiver() as rx:
        deliver_webhook(_hook(rx.url, body_template="{{ summary }} / {{ error }}"), _event())
    request = rx.requests[0]
    assert request.headers["Content-Type"].startswith("text/plain")
    assert request.body.decode() == (
        'Rocky pipeline error: pipeline orders (Failure) / model "fct" failed: <boom> & more'
    )


def test_a_500_is_retried_and_then_succeeds_with_one_delivery_id() -> None:
    with receiver(statuses=[500, 502, 200]) as rx:
        outcome = deliver_webhook(_hook(rx.url, retry_count=2, secret=SECRET), _event())
    assert outcome.ok and outcome.attempts == 3
    assert len(rx.requests) == 3
    assert len({r.headers["X-Rocky-Delivery"] for r in rx.requests}) == 1
    for request in rx.requests:
        _verify(request)


def test_a_receiver_that_keeps_failing_is_warned_about_and_never_fails_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with receiver(statuses=[500]) as rx:
        config = make_project(
            tmp_path, {"good": GOOD_SQL},
            extra_toml=_webhook_toml(rx.url, "pipeline_complete", preset="slack", secret=SECRET,
                                     retry_count=2, retry_delay_ms=10),
        )
        with caplog.at_level(logging.WARNING, logger="rocky"):
            out = run_in_process(config)
    assert out.status == "Success" and out.exit_code() == 0
    assert len(rx.requests) == 3  # the first attempt + retry_count retries
    assert (f"webhook on_pipeline_complete (slack preset, http://127.0.0.1:{rx.port}) failed after 3 "
            "attempts: HTTP 500; the run goes on") in caplog.text
    assert "T0KEN-SECRET-PATH" not in caplog.text and SECRET not in caplog.text


def test_a_receiver_that_times_out_is_retried_then_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with receiver(delay_s=1.0) as rx:
        config = make_project(
            tmp_path, {"good": GOOD_SQL},
            extra_toml=_webhook_toml(rx.url, "pipeline_complete", timeout_ms=200, retry_count=1,
                                     retry_delay_ms=10),
        )
        with caplog.at_level(logging.WARNING, logger="rocky"):
            out = run_in_process(config)
        attempts = len(rx.requests)
    assert out.status == "Success"
    assert attempts == 2
    assert "failed after 2 attempts: timed out after 200 ms; the run goes on" in caplog.text


def test_a_4xx_is_final() -> None:
    with receiver(statuses=[404]) as rx:
        outcome = deliver_webhook(_hook(rx.url, retry_count=3), _event())
    assert not outcome.ok and outcome.attempts == 1 and outcome.error == "HTTP 404"
    assert len(rx.requests) == 1


def test_an_unreachable_receiver_never_raises() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outcome = deliver_webhook(_hook(f"http://127.0.0.1:{port}/x?token=abc", retry_count=1), _event())
    assert not outcome.ok and outcome.attempts == 2
    assert outcome.error is not None and "ConnectError" in outcome.error and "token=abc" not in outcome.error


def test_receiver_name_hides_path_and_query() -> None:
    assert receiver_name("https://hooks.slack.com/services/T0/B0/XYZ") == "https://hooks.slack.com"
    assert receiver_name("http://127.0.0.1:8080/a?token=1") == "http://127.0.0.1:8080"


def test_httpx_is_imported_only_when_a_webhook_is_configured(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"good": GOOD_SQL}, extra_toml="""
        [[hook.on_pipeline_complete]]
        command = "true"
        """)
    script = textwrap.dedent(f"""
        import sys
        from tests.engine.hooks.kit import run_in_process
        from pathlib import Path
        out = run_in_process(Path({str(config)!r}))
        print(out.status, "httpx" in sys.modules)
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout.split() == ["Success", "False"], proc.stderr
