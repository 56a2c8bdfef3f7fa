"""``rocky serve`` refusals and startup: exact messages, exit codes, nothing started."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rocky_engine.project import load_project
from rocky_engine.state import StateStore
from tests.engine.server.kit import ROCKY, child_env, serving, simple_project


def _serve(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROCKY, "serve", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=child_env(env))


def test_a_public_bind_without_a_token_is_refused(tmp_path: Path) -> None:
    simple_project(tmp_path)
    proc = _serve(tmp_path, "--host", "0.0.0.0", "--port", "0")
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith(
        "error: refusing to serve on 0.0.0.0 without a token: anyone who can reach it could run pipelines; "
        "pass --token or set ROCKY_SERVE_TOKEN, or bind 127.0.0.1"
    )
    assert proc.stdout == ""


def test_a_port_in_use_is_a_clean_error(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve(tmp_path, "--port", str(port))
    assert proc.returncode == 1
    expected = f"error: cannot listen on 127.0.0.1:{port}: Address already in use; pick another --port"
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_broken_config_is_refused_at_startup(tmp_path: Path) -> None:
    (tmp_path / "rocky.toml").write_text("[pipeline.x\n", encoding="utf-8")
    proc = _serve(tmp_path, "--port", "0")
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "rocky.toml" in proc.stderr


def test_a_store_newer_than_this_engine_is_refused(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    path = load_project(config, env={}).state_path()
    StateStore.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE metadata SET value = '999' WHERE key = 'schema_version'")
    proc = _serve(tmp_path, "--port", "0")
    assert proc.returncode == 1
    assert "has schema version 999, newer than this engine supports" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--poll-interval-seconds", "0"], "must be greater than 0, got 0"),
        (["--drain-timeout-seconds", "-1"], "must be 0 or more, got -1"),
        (["--port", "70000"], "port must be 0-65535"),
        (["--webhook-burst", "0"], "--webhook-burst must be at least 1, got 0"),
        (["--max-connections", "0"], "--max-connections: must be at least 1, got 0"),
        (["--max-header-bytes", "512"], "--max-header-bytes: must be at least 1024, got 512"),
        (["--max-header-bytes", "lots"], "'lots' is not a whole number"),
        (["--request-timeout-seconds", "0"], "--request-timeout-seconds: must be greater than 0, got 0"),
        (["--allowed-host", "https://rocky.example.com"],
         "error: --allowed-host takes a host name or IP address without scheme, port or path (like "
         "rocky.example.com), got 'https://rocky.example.com'"),
        (["--allowed-origin", "dash.example.com"],
         "error: --allowed-origin takes an origin like https://dash.example.com or http://localhost:3000 "
         "(scheme, host, optional port; no path), got 'dash.example.com'"),
    ],
)
def test_bad_flags(tmp_path: Path, args: list[str], message: str) -> None:
    simple_project(tmp_path)
    proc = _serve(tmp_path, *args)
    assert proc.returncode == 1 and message in proc.stderr


def test_a_token_from_the_environment_protects_the_api(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path, env={"ROCKY_SERVE_TOKEN": "envtok"}) as srv, srv.client() as c:
        assert c.get("/api/v1/runs").status_code == 401
        assert c.get("/api/v1/runs", headers={"Authorization": "Bearer envtok"}).status_code == 200
        assert "auth: bearer token" in srv.log()


def test_a_bad_allowed_host_in_the_environment_is_refused(tmp_path: Path) -> None:
    simple_project(tmp_path)
    proc = _serve(tmp_path, env={"ROCKY_SERVE_ALLOWED_HOSTS": "ok.example,bad.example:8080"})
    assert proc.returncode == 1
    assert "--allowed-host takes a host name or IP address" in proc.stderr
    assert "'bad.example:8080'" in proc.stderr


def test_help_does_not_import_the_server_stack() -> None:
    code = (
        "import sys; from rocky_engine.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'duckdb', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
    help_text = subprocess.run([*ROCKY, "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    for flag in ("--host", "--port", "--token", "--scheduler", "--poll-interval-seconds",
                 "--drain-timeout-seconds", "--allowed-host", "--allowed-origin", "--max-connections",
                 "--max-header-bytes", "--request-timeout-seconds", "ROCKY_SERVE_ALLOWED_HOSTS",
                 "ROCKY_SERVE_ALLOWED_ORIGINS"):
        assert flag in help_text
    assert "--kill-grace-seconds" not in help_text
