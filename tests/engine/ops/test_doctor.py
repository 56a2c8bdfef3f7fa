"""``rocky doctor`` checks, in process: severities of each check on real files and servers."""

from __future__ import annotations

import fcntl
import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.ops.doctor import run_doctor
from rocky_engine.state._time import to_db
from rocky_engine.state.schema import SCHEMA_VERSION
from rocky_engine.state.store import StateStore
from rocky_engine.wire.doctor import DoctorResult
from tests.engine.hooks.kit import BAD_SQL, GOOD_SQL, make_project, receiver, run_in_process

SCHEDULED = """
[pipeline.models.schedule]
cron = "*/5 * * * *"
"""


def _checks(result: DoctorResult) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in result.checks}


def test_a_healthy_project(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    run_in_process(config)
    result = run_doctor(config)
    checks = _checks(result)
    assert list(checks) == ["config", "state", "state_schema", "adapters", "pipelines", "auth"]
    assert result.overall == "healthy" and result.exit_code() == 0
    assert checks["state"][1].endswith("readable, 1 run(s) recorded")
    assert checks["state_schema"] == ("healthy", f"schema version {SCHEMA_VERSION} (current)")
    assert checks["adapters"] == ("healthy", f"default: {tmp_path / 'wh.duckdb'} opens (DuckDB)")
    assert checks["pipelines"] == ("healthy", "1 pipeline(s): models (1 models)")
    assert checks["auth"] == ("healthy", "no adapter needs credentials (embedded DuckDB only)")
    assert result.suggestions == []
    assert all(c.duration_ms >= 0 for c in result.checks)


def test_check_selects_one_check(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    result = run_doctor(config, only="config")
    assert [c.name for c in result.checks] == ["config"]


def test_a_config_that_does_not_load_is_critical(tmp_path: Path) -> None:
    unset = '\n[hook.webhooks.on_pipeline_error]\nurl = "${DOCTOR_UNSET_URL}"\n'
    config = make_project(tmp_path, extra_toml=unset)
    result = run_doctor(config, environ={})
    checks = _checks(result)
    assert result.overall == "critical" and result.exit_code() == 3
    assert checks["config"][0] == "critical"
    assert "environment variable DOCTOR_UNSET_URL is not set" in checks["config"][1]
    # checks that need the config are left out; the state checks still run
    assert list(checks) == ["config", "state", "state_schema"]
    assert "fix rocky.toml; `rocky validate` lists every problem" in result.suggestions


def test_asking_for_a_check_that_needs_a_broken_config(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    config.write_text(config.read_text() + "\n[broken\n")
    result = run_doctor(config, only="adapters")
    assert [(c.name, c.status) for c in result.checks] == [("adapters", "critical")]
    assert result.checks[0].message.startswith("not checked: rocky.toml does not load")


def test_a_cross_reference_error_is_critical(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml="""
        [pipeline.other]
        type = "transformation"
        models = "models/**"
        [pipeline.other.target]
        adapter = "nowhere"
        """)
    checks = _checks(run_doctor(config, only="config"))
    assert checks["config"][0] == "critical"
    assert checks["config"][1].startswith("1 config error(s); first: V002 pipeline.other.target.adapter")


def test_config_warnings_are_a_warning(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml='\n[[hook.on_nope]]\ncommand = "true"\n')
    result = run_doctor(config, only="config")
    assert result.overall == "warning" and result.exit_code() == 0
    assert "unknown hook event 'on_nope'" in result.checks[0].message


def test_a_damaged_state_store_is_critical(tmp_path: Path) -> None:
    # every run, tick and history fails on it until it is restored or moved aside (issue 13 item 13)
    config = make_project(tmp_path)
    store = tmp_path / "models" / ".rocky-state.db"
    store.write_bytes(b"this is not a sqlite database" * 100)
    result = run_doctor(config)
    checks = _checks(result)
    assert checks["state"][0] == "critical"
    assert checks["state"][1].startswith(f"state store at {store} is damaged: SQLite cannot ")
    assert checks["state_schema"][0] == "warning"
    assert result.overall == "critical" and result.exit_code() == 3
    assert any(f"move it aside (mv {store} {store}.corrupt)" in s for s in result.suggestions)


def test_an_unreadable_state_store_is_a_warning(tmp_path: Path) -> None:
    # not damaged, only not openable here (a directory where the file belongs): the seed's Warning
    config = make_project(tmp_path)
    store = tmp_path / "models" / ".rocky-state.db"
    store.mkdir()
    result = run_doctor(config)
    checks = _checks(result)
    assert checks["state"][0] == "warning"
    assert checks["state"][1].startswith("state store is unreadable: state store at")
    assert result.exit_code() == 0


def test_a_missing_state_store_is_healthy(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    checks = _checks(run_doctor(config))
    assert checks["state"] == ("healthy", f"no state store yet at {tmp_path / 'models' / '.rocky-state.db'}; "
                                          "the first run creates it")


def _bump_schema(path: Path, version: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("UPDATE metadata SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()


def test_a_newer_state_schema_is_a_warning_or_critical_under_fail(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    run_in_process(config)
    _bump_schema(tmp_path / "models" / ".rocky-state.db", 99)
    checks = _checks(run_doctor(config))
    assert checks["state_schema"][0] == "warning"
    assert "newer than this engine" in checks["state_schema"][1]
    config.write_text(config.read_text() + '\n[state]\non_schema_mismatch = "fail"\n')
    result = run_doctor(config)
    assert _checks(result)["state_schema"][0] == "critical"
    assert result.exit_code() == 3


def test_an_unreachable_duckdb_location_is_critical(tmp_path: Path) -> None:
    config = make_project(tmp_path, seed=False)
    text = config.read_text().replace('path = "wh.duckdb"', 'path = "/proc/no/such/dir/wh.duckdb"')
    config.write_text(text)
    result = run_doctor(config, only="adapters")
    assert result.overall == "critical"
    assert "does not exist and /proc/no/such/dir is not a writable directory" in result.checks[0].message


def test_a_duckdb_file_in_use_is_a_warning(tmp_path: Path) -> None:
    import duckdb

    config = make_project(tmp_path)
    code = (f"import duckdb,time; c=duckdb.connect({str(tmp_path / 'wh.duckdb')!r}); "
            "print('ready', flush=True); time.sleep(30)")
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        result = run_doctor(config, only="adapters")
    finally:
        holder.kill()
        holder.wait()
    assert result.checks[0].status == "warning", result.checks[0].message
    assert "is locked by another process" in result.checks[0].message
    del duckdb


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_postgres_warehouse_is_critical(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    port = _closed_port()
    config = make_project(tmp_path, seed=False)
    config.write_text(config.read_text().replace('[adapter]\ntype = "duckdb"\npath = "wh.duckdb"', f"""
[adapter.default]
type = "postgres"
host = "127.0.0.1"
port = {port}
user = "rocky"
password = "pg-s3cret"
dbname = "analytics"
"""))
    result = run_doctor(config)
    checks = _checks(result)
    assert checks["adapters"][0] == "critical" and checks["auth"][0] == "critical"
    assert checks["adapters"][1].startswith(
        f"default: cannot connect to PostgreSQL adapter 'default' at 127.0.0.1:{port}/analytics"
    )
    assert "pg-s3cret" not in str(result.wire())
    assert result.exit_code() == 3


def test_fivetran_credentials_are_checked_by_auth(tmp_path: Path) -> None:
    with receiver(statuses=[401]) as rx:
        config = make_project(tmp_path)
        config.write_text(config.read_text().replace("[adapter]", "[adapter.default]") + f"""
            [adapter.ft]
            type = "fivetran"
            kind = "discovery"
            api_key = "ft-key"
            api_secret = "ft-s3cret"
            destination_id = "dest_1"
            base_url = "http://127.0.0.1:{rx.port}"
            """)
        rejected = run_doctor(config, only="auth")
        rx.statuses[:] = [200]
        rx.requests.clear()
        accepted = run_doctor(config, only="auth")
        request = rx.requests[0]
    assert rejected.overall == "critical"
    assert rejected.checks[0].message == "ft: Fivetran rejected the API key/secret (HTTP 401)"
    assert accepted.overall == "healthy"
    assert request.path == "/v1/destinations/dest_1"
    assert request.headers["Authorization"].startswith("Basic ")
    assert "ft-s3cret" not in str(rejected.wire())


def test_a_pipeline_whose_latest_run_failed_is_a_warning(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"good": GOOD_SQL, "bad": BAD_SQL})
    out = run_in_process(config)
    checks = _checks(run_doctor(config, only="pipelines"))
    expected = f"1 pipeline(s); models: latest run {out.run_id} ended PartialFailure"
    assert checks["pipelines"] == ("warning", expected)


def test_a_model_that_does_not_load_is_critical(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"a": "SELECT * FROM b", "b": "SELECT * FROM a"})
    checks = _checks(run_doctor(config, only="pipelines"))
    assert checks["pipelines"][0] == "critical"
    assert "circular dependency" in checks["pipelines"][1]


# --- scheduler ------------------------------------------------------------------------------------------


@contextmanager
def _held_tick_lock(root: Path, heartbeat_age: float) -> Iterator[None]:
    dot = root / ".rocky"
    dot.mkdir(exist_ok=True)
    fd = os.open(dot / "tick.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    heartbeat = dot / "tick.lock.heartbeat"
    heartbeat.write_text('{"pid": 1}')
    stamp = datetime.now(UTC).timestamp() - heartbeat_age
    os.utime(heartbeat, (stamp, stamp))
    try:
        yield
    finally:
        os.close(fd)


def _evaluated(root: Path, at: datetime) -> None:
    with StateStore.open(root / "models" / ".rocky-state.db") as store, store.transaction() as conn:
        conn.execute("INSERT INTO schedule_state (pipeline, last_evaluated_at) VALUES ('models', ?)",
                     (to_db(at),))


def test_the_scheduler_check_runs_only_when_a_pipeline_is_scheduled(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    assert "scheduler" not in _checks(run_doctor(config))
    only = run_doctor(config, only="scheduler")
    assert _checks(only)["scheduler"] == ("healthy", "no pipeline declares a [schedule]; nothing to check")
    config.write_text(config.read_text() + SCHEDULED)
    assert "scheduler" in _checks(run_doctor(config))


def test_a_wedged_reconciler_is_critical(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml=SCHEDULED)
    _evaluated(tmp_path, datetime.now(UTC))
    with _held_tick_lock(tmp_path, heartbeat_age=900):
        result = run_doctor(config, only="scheduler")
    assert result.overall == "critical" and result.exit_code() == 3
    assert "wedged" in result.checks[0].message or "stale" in result.checks[0].message


def test_a_tick_in_progress_is_healthy(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml=SCHEDULED)
    _evaluated(tmp_path, datetime.now(UTC) - timedelta(seconds=30))
    with _held_tick_lock(tmp_path, heartbeat_age=5):
        result = run_doctor(config, only="scheduler")
    assert result.overall == "healthy", result.checks[0].message


def test_a_dead_timer_is_a_warning(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml=SCHEDULED)
    now = datetime.now(UTC)
    _evaluated(tmp_path, now - timedelta(seconds=700))  # > 2 x 300 s
    stale = run_doctor(config, only="scheduler", now=now)
    assert stale.overall == "warning" and stale.exit_code() == 0
    fresh = run_doctor(config, only="scheduler", now=now - timedelta(seconds=500))
    assert fresh.overall == "healthy", fresh.checks[0].message


def test_never_ticked_is_a_warning(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml=SCHEDULED)
    result = run_doctor(config, only="scheduler")
    assert result.overall == "warning"


def test_scheduler_messages_say_what_is_wrong(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml=SCHEDULED)
    now = datetime(2026, 5, 2, 3, 0, tzinfo=UTC)
    _evaluated(tmp_path, now - timedelta(seconds=700))
    dead = run_doctor(config, only="scheduler", now=now).checks[0]
    assert dead.status == "warning"
    assert dead.message == ("no tick has evaluated any schedule since 2026-05-02T02:48:20.000Z (over twice "
                            "the shortest interval, 300 s): the timer looks dead")
    with _held_tick_lock(tmp_path, heartbeat_age=900):
        wedged = run_doctor(config, only="scheduler").checks[0]
    assert wedged.status == "critical"
    assert wedged.message.endswith("s): the reconciler is wedged")


def test_remote_state_checks_appear_on_a_remote_backend(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    config = make_project(tmp_path)
    assert "state_rw" not in _checks(run_doctor(config))
    port = _closed_port()
    config.write_text(config.read_text() + f"""
[state]
backend = "valkey"
valkey_url = "redis://:valkey-s3cret@127.0.0.1:{port}/0"
transfer_timeout_seconds = 2
""")
    result = run_doctor(config)
    checks = _checks(result)
    assert checks["state_rw"][0] == "critical"
    assert checks["state_concurrency"][0] == "warning"
    assert result.exit_code() == 3
    assert "valkey-s3cret" not in str(result.wire())
    only = run_doctor(config, only="state_concurrency")
    assert [c.name for c in only.checks] == ["state_concurrency"]
