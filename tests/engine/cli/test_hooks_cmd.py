"""``rocky hooks list`` and ``rocky hooks test`` as a real subprocess."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from tests.engine.hooks.kit import make_project, receiver, rocky

HOOKS = """
[[hook.on_pipeline_error]]
command = "cat > error-context.json"
on_failure = "warn"
env = { SMTP_PASSWORD = "hunter2-secret" }

[[hook.on_pipeline_error]]
command = "/srv/analytics/send-brief.sh"
timeout_ms = 5000

[[hook.on_before_model_run]]
command = "exit 1"
on_failure = "abort"

[[hook.on_typo_event]]
command = "true"
"""


def test_hooks_list_shows_command_hooks_only_and_never_env_values(tmp_path: Path) -> None:
    with receiver() as rx:
        config = make_project(tmp_path, extra_toml=HOOKS + f"""
[hook.webhooks.on_pipeline_error]
url = "{rx.url}"
preset = "slack"
""")
        proc = rocky(config, "hooks", "list", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["command"] == "hooks list"
    assert [(h["event"], h["index"], h["command"]) for h in doc["hooks"]] == [
        ("on_pipeline_error", 0, "cat > error-context.json"),
        ("on_pipeline_error", 1, "/srv/analytics/send-brief.sh"),
        ("on_before_model_run", 0, "exit 1"),
    ]
    assert doc["hooks"][0]["env"] == ["SMTP_PASSWORD"]
    assert doc["hooks"][1]["timeout_ms"] == 5000 and doc["hooks"][2]["on_failure"] == "abort"
    assert "hunter2-secret" not in proc.stdout and "T0KEN-SECRET-PATH" not in proc.stdout
    assert "unknown hook event 'on_typo_event'" in doc["warnings"][0]
    table = rocky(config, "hooks", "list", "--output", "table")
    assert "on_pipeline_error" in table.stdout and "webhooks" not in table.stdout
    assert "warning: unknown hook event 'on_typo_event'" in table.stdout


def test_hooks_list_with_no_hooks(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    proc = rocky(config, "hooks", "list", "--output", "table")
    assert proc.returncode == 0
    assert proc.stdout == "no command hooks configured ([[hook.on_<event>]])\n"


def test_hooks_test_fires_a_synthetic_event_at_commands_and_the_webhook(tmp_path: Path) -> None:
    with receiver() as rx:
        config = make_project(tmp_path, extra_toml=f"""
[[hook.on_pipeline_error]]
command = "cat > error-context.json"

[hook.webhooks.on_pipeline_error]
url = "{rx.url}"
preset = "generic"
secret = "whsec"
""")
        proc = rocky(config, "hooks", "test", "on_pipeline_error", "--output", "json")
        requests = list(rx.requests)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["event"] == "on_pipeline_error" and doc["pipeline"] == "models"
    assert [(r["kind"], r["hook"], r["ok"]) for r in doc["results"]] == [
        ("command", "on_pipeline_error[0]", True), ("webhook", "webhooks.on_pipeline_error", True),
    ]
    assert doc["results"][1]["target"] == f"http://127.0.0.1:{rx.port}"
    context = json.loads((tmp_path / "error-context.json").read_text())
    assert context["run_id"] == doc["run_id"] and context["run_id"].startswith("hooks-test-")
    assert context["metadata"] == {"test": True, "status": "Failure"}
    assert context["error"] == "synthetic error fired by `rocky hooks test`"
    assert len(requests) == 1
    body = requests[0].body
    assert json.loads(body) == context
    expected = "sha256=" + hmac.new(b"whsec", body, hashlib.sha256).hexdigest()
    assert requests[0].headers["X-Rocky-Signature"] == expected


def test_hooks_test_reports_a_failing_hook_and_exits_1(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml=HOOKS)
    proc = rocky(config, "hooks", "test", "on_before_model_run", "--output", "json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)["results"][0]
    assert result["ok"] is False and result["exit_code"] == 1 and result["on_failure"] == "abort"
    assert result["error"] == "exited with code 1"


def test_hooks_test_rejects_unknown_and_unconfigured_events(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml=HOOKS)
    unknown = rocky(config, "hooks", "test", "on_pipeline_eror")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith(
        "error: unknown hook event 'on_pipeline_eror'; valid events: on_pipeline_start"
    )
    missing = rocky(config, "hooks", "test", "on_after_checks")
    assert missing.returncode == 1
    assert missing.stderr == (
        "error: no hook is configured for on_after_checks; configured events: on_before_model_run, "
        "on_pipeline_error\n"
    )
