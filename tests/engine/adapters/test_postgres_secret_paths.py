"""Error paths that really carry the PostgreSQL secret: it must not reach stdout, stderr or the state.

A credential mix-up (the password pasted into the user field as well) makes the server's own error quote
the secret (``password authentication failed for user "<secret>"``); a failing query can quote it too (a
value in the statement). Both go through ``rocky run`` in this process; the assertions scan everything the
run printed or wrote, whatever code does the masking.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.postgres import PgDatabase, PgServer

pytestmark = pytest.mark.services

SECRET = "hunter2-Pg-Secret-4711"


def _project(root: Path, dsn_env: str, model_sql: str) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "models" / "m.sql").write_text(model_sql)
    config = root / "rocky.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [adapter]
            type = "postgres"
            dsn = "${{{dsn_env}}}"

            [adapter.retry]
            initial_backoff_ms = 10
            max_retries = 0

            [pipeline.models]
            type = "transformation"
            """
        )
    )
    return config


def _leaks(root: Path, secret: str, out: str, err: str) -> list[str]:
    """Where ``secret`` shows up: the output streams and every file under ``root`` (state, logs, ...)."""
    found = [name for name, text in (("stdout", out), ("stderr", err)) if secret in text]
    for path in root.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


def test_a_login_error_quoting_the_secret_is_masked(
    tmp_path: Path, pg_server: PgServer, pg_db: PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # user and password both hold the secret: the server answers with the user name, i.e. the secret
    dsn = f"postgresql://{SECRET}:{SECRET}@127.0.0.1:{pg_server.port}/{pg_db.name}"
    monkeypatch.setenv("ROCKY_TEST_PG_DSN", dsn)
    config = _project(tmp_path, "ROCKY_TEST_PG_DSN", "SELECT 1 AS x")
    result = rocky_in_process(["-c", str(config), "--output", "json", "run"])
    assert result.returncode != 0, result.stdout + result.stderr
    assert "password authentication failed" in result.stdout + result.stderr
    assert _leaks(tmp_path, SECRET, result.stdout, result.stderr) == []


def test_a_query_error_quoting_the_secret_is_masked(
    tmp_path: Path, pg_server: PgServer, pg_db: PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = f"postgresql://{pg_server.user}:{pg_server.password}@127.0.0.1:{pg_server.port}/{pg_db.name}"
    monkeypatch.setenv("ROCKY_TEST_PG_DSN", dsn)
    # The statement fails with the server quoting the value: `invalid input syntax for type integer: "..."`.
    config = _project(tmp_path, "ROCKY_TEST_PG_DSN", f"SELECT CAST('{pg_server.password}' AS integer) AS x")
    result = rocky_in_process(["-c", str(config), "--output", "json", "run"])
    assert result.returncode != 0, result.stdout + result.stderr
    assert "invalid input syntax for type integer" in result.stdout + result.stderr
    # the model file itself holds the value (the user wrote it there); nothing else may
    leaks = [p for p in _leaks(tmp_path, pg_server.password, result.stdout, result.stderr)
             if p != "models/m.sql"]
    assert leaks == []

