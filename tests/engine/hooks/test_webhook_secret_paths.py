"""Webhook failures whose error text carries the URL (Slack/Teams URLs embed their token) or the signing
secret: the delivery outcome, the run's output and its state never show either.

The first test uses a transport whose failure quotes the request, as proxies and custom transports do
(httpx's own errors name neither today, so this is the path the scrubbing exists for); the second is a
real run whose webhook cannot be reached, scanned end to end.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from rocky_engine.config.hooks import WebhookHook
from rocky_engine.hooks.event import HookEvent
from rocky_engine.hooks.webhooks import deliver_webhook
from tests.engine.hooks.kit import BAD_SQL, make_project
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.postgres import free_port

TOKEN = "T0KEN-b7f3e1-in-the-path"
SECRET = "whsec-9d41-signing-secret"


def _event() -> HookEvent:
    return HookEvent.model_validate({
        "event": "pipeline_error", "run_id": "run-20260502-030000-000", "pipeline": "models",
        "timestamp": "2026-05-02T03:00:00.000Z", "metadata": {"status": "Failure", "exit_code": 1},
    })


@pytest.mark.parametrize("error", [httpx.ConnectError, httpx.ProxyError, ValueError])
def test_an_error_quoting_the_url_and_the_secret_is_scrubbed(error: type[Exception]) -> None:
    url = f"https://hooks.example.test/services/{TOKEN}"

    def fail(request: httpx.Request) -> httpx.Response:
        raise error(f"cannot deliver to {request.url} (signed with {SECRET})")

    hook = WebhookHook.model_validate({"url": url, "secret": SECRET, "retry_count": 0})
    outcome = deliver_webhook(hook, _event(), transport=httpx.MockTransport(fail))
    assert not outcome.ok and outcome.error is not None
    assert TOKEN not in outcome.error and SECRET not in outcome.error, outcome.error
    assert "https://hooks.example.test" in outcome.error  # the receiver is still named


def test_an_unreachable_webhook_leaks_neither_url_nor_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCKY_TEST_HOOK_URL", f"http://127.0.0.1:{free_port()}/services/{TOKEN}")
    monkeypatch.setenv("ROCKY_TEST_HOOK_SECRET", SECRET)
    hook = (
        '\n[hook.webhooks.on_pipeline_error]\nurl = "${ROCKY_TEST_HOOK_URL}"\n'
        'secret = "${ROCKY_TEST_HOOK_SECRET}"\nretry_count = 0\n'
    )
    config = make_project(tmp_path, {"bad": BAD_SQL}, extra_toml=hook)
    result = rocky_in_process(["-c", str(config), "--output", "json", "run"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "webhook" in result.stderr  # the failed delivery is reported
    for secret in (TOKEN, SECRET):
        assert secret not in result.stdout and secret not in result.stderr
        written = [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
        assert written == [], written
