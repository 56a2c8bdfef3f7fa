"""Secrets outside connectors: a bearer token substituted into a hook command (`${PAGER_TOKEN}`), a hook's
`env` value, and a webhook URL with its token in the path. A failed command hook echoes the token and the
env value on stderr and the webhook answers 500: neither `rocky hooks list` (JSON and table), nor `rocky
run` (its document, its log, the run record in the state file), nor `rocky hooks test` shows any of
them, and `config_hash` is the hash of the config with each secret replaced by its name."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from tests.engine.hooks.kit import make_project, receiver
from tests.engine.redact.scan import leaks
from tests.fixtures.inprocess import rocky_in_process

TOKEN = "tok_live_4f9a8b7c6d5e4f3a2b1c"
ENV_SECRET = "hook-env-secret-value-77"

HOOKS = """
[[hook.on_pipeline_start]]
command = "echo 'the pager refused bearer ${{PAGER_TOKEN}}' >&2; exit 3"

[[hook.on_pipeline_start]]
command = "echo \\"login failed with $API_PASSWORD\\" >&2; exit 4"
env = {{ API_PASSWORD = "{env_secret}" }}

[hook.webhooks.on_pipeline_start]
url = "{url}"
"""


def _state_text(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob(".rocky-state.db*"))


def test_hook_secrets_stay_out_of_lists_runs_tests_logs_and_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGER_TOKEN", TOKEN)
    with receiver(statuses=[500]) as hook_server:
        url_secret = hook_server.url.split("/", 3)[3]  # the path after the host: the webhook's token
        config = make_project(tmp_path, extra_toml=HOOKS.format(env_secret=ENV_SECRET, url=hook_server.url))
        c = str(config)
        listed = rocky_in_process(["-c", c, "--output", "json", "hooks", "list"])
        table = rocky_in_process(["-c", c, "--output", "table", "hooks", "list"])
        run = rocky_in_process(["-c", c, "--output", "json", "run"])
        tested = rocky_in_process(["-c", c, "--output", "json", "hooks", "test", "on_pipeline_start"])
        assert hook_server.requests, "the webhook was sent (and answered 500)"

    assert listed.returncode == 0, listed.stderr
    commands = [h["command"] for h in json.loads(listed.stdout)["hooks"]]
    assert "${PAGER_TOKEN}" in commands[0]
    assert run.returncode == 0, run.stderr
    assert "${PAGER_TOKEN}" in run.stderr and "${API_PASSWORD}" in run.stderr  # the stderr excerpts, named
    assert tested.returncode == 1
    errors = [r.get("error") or "" for r in json.loads(tested.stdout)["results"]]
    assert any("${PAGER_TOKEN}" in e for e in errors), errors
    outputs = [text for p in (listed, table, run, tested) for text in (p.stdout, p.stderr)]
    state = _state_text(tmp_path)
    assert state
    for secret in (TOKEN, ENV_SECRET, url_secret):
        assert leaks(secret, *outputs, state) == []

    # config_hash: the config with each secret replaced by its name, never the text with the secret in it
    text = config.read_text()
    substituted = text.replace("${PAGER_TOKEN}", TOKEN)
    [stored] = sqlite3.connect(next(tmp_path.rglob(".rocky-state.db"))).execute(
        "SELECT config_hash FROM run_history"
    ).fetchall()
    assert stored[0] != hashlib.sha256(substituted.encode()).hexdigest()
    named = (text.replace(hook_server.url, "${hook.webhooks.on_pipeline_start.url}")
             .replace(ENV_SECRET, "${API_PASSWORD}"))
    assert stored[0] == hashlib.sha256(named.encode()).hexdigest()
