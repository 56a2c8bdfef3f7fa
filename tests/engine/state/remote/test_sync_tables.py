"""What a sync carries: the syncable tables travel between machines, the local-only tables never do, and
an older engine meeting a newer store recreates (never uploading) or refuses."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from rocky_engine.state.schema import LOCAL_ONLY_TABLES, SCHEMA_VERSION
from tests.engine.state.remote.conftest import WATERMARK_KEY, Machine, Remote, snapshot_rows

pytestmark = [pytest.mark.services, pytest.mark.slow]


def _edit_snapshot(remote: Remote, tmp_path: Path, *statements: str) -> None:
    """Rewrite the remote snapshot with ``statements`` applied (a rogue or newer writer)."""
    data = remote.snapshot()
    assert data is not None
    path = tmp_path / "edit.sqlite"
    path.write_bytes(data)
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    remote.put_snapshot(path.read_bytes())


def test_second_machine_continues_from_the_first_machines_state(
    s3_remote: Remote, machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    a, b = machines("a"), machines("b")
    synced = tmp_path / "synced.json"
    a.write(s3_remote.state_toml(), f"[[hook.on_state_synced]]\ncommand = 'cat > {synced}'\n")
    b.write(s3_remote.state_toml())
    a.seed("2024-01-01 00:00:00")
    first = a.rocky("run", "-o", "json")
    assert first.returncode == 0, first.stderr
    assert "this run's state will be the first upload" in first.stderr
    event = json.loads(synced.read_text())
    assert event["event"] == "state_synced"
    assert event["metadata"]["backend"] == "s3"
    assert event["metadata"]["generation"] == s3_remote.generation()

    b.seed("2023-01-01 00:00:00", "2024-03-01 00:00:00")
    second = b.rocky("run", "-o", "json")
    assert second.returncode == 0, second.stderr
    assert "downloaded the remote state" in second.stderr
    doc = json.loads(second.stdout)
    runs = [json.loads(first.stdout)["run_id"], doc["run_id"]]
    assert [r[0] for r in b.local_rows("SELECT run_id FROM run_history ORDER BY 1")] == sorted(runs)
    data = s3_remote.snapshot()
    assert data is not None
    assert snapshot_rows(data, tmp_path, f"SELECT value FROM watermarks WHERE key = '{WATERMARK_KEY}'") == [
        ("2024-03-01T00:00:00Z",)
    ]
    # The generation this machine last saw is kept locally (cas compares against the downloaded one).
    generation = b.local_rows("SELECT value FROM metadata WHERE key = 'remote_generation'", default=None)
    assert generation == s3_remote.generation()


def test_local_only_tables_are_never_uploaded_nor_overwritten(
    s3_remote: Remote, machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    m = machines("m")
    m.write(s3_remote.state_toml())
    m.seed("2024-01-01 00:00:00")
    assert m.rocky("run").returncode == 0
    conn = sqlite3.connect(m.state_path)
    conn.execute("INSERT INTO schedule_state (pipeline, cron_anchor) VALUES ('local-p', 'local-anchor')")
    conn.execute(
        "INSERT INTO schedule_claims (claim_key, pipeline, source, submission_id, state, created_at, "
        "updated_at) VALUES ('local-claim', 'models', 'cron', 'sub-1', 'submitted', 'x', 'x')"
    )
    conn.execute(
        "INSERT INTO jobs (job_id, kind, state, submitted_at) VALUES ('local-job', 'run', 'queued', 'x')"
    )
    conn.execute("INSERT INTO metadata (key, value) VALUES ('brief_cursor', 'local-cursor')")
    conn.commit()
    conn.close()

    upload = m.rocky("run")
    assert upload.returncode == 0, upload.stderr
    data = s3_remote.snapshot()
    assert data is not None
    for table in LOCAL_ONLY_TABLES:
        assert snapshot_rows(data, tmp_path, f"SELECT count(*) FROM {table}") == [(0,)], table
    assert sorted(snapshot_rows(data, tmp_path, "SELECT key FROM metadata")) == [
        ("engine_version",), ("schema_version",)
    ]

    # A snapshot that does carry scheduler rows (a rogue writer) still never lands in them.
    _edit_snapshot(
        s3_remote, tmp_path,
        "INSERT INTO schedule_state (pipeline, cron_anchor) VALUES ('remote-p', 'remote-anchor')",
        "INSERT INTO jobs (job_id, kind, state, submitted_at) VALUES ('remote-job', 'run', 'queued', 'x')",
        "INSERT INTO metadata (key, value) VALUES ('brief_cursor', 'remote-cursor')",
        "INSERT INTO watermarks (key, value, updated_at) VALUES ('remote.only.mark', 'v', 'x')",
    )
    download = m.rocky("run")
    assert download.returncode == 0, download.stderr
    assert m.local_rows("SELECT pipeline, cron_anchor FROM schedule_state") == [("local-p", "local-anchor")]
    assert m.local_rows("SELECT claim_key FROM schedule_claims") == [("local-claim",)]
    assert m.local_rows("SELECT job_id FROM jobs") == [("local-job",)]
    assert m.local_rows("SELECT value FROM metadata WHERE key = 'brief_cursor'") == [("local-cursor",)]
    # ... while the syncable tables did come down.
    assert m.local_rows("SELECT value FROM watermarks WHERE key = 'remote.only.mark'") == [("v",)]


def _newer_remote(remote: Remote, machines: Callable[[str], Machine], tmp_path: Path, policy: str) -> Machine:
    m = machines("m")
    m.write(remote.state_toml(on_schema_mismatch=policy))
    m.seed("2024-01-01 00:00:00")
    assert m.rocky("run").returncode == 0
    newer = f"UPDATE metadata SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'"
    _edit_snapshot(remote, tmp_path, newer)
    return m


def test_newer_remote_store_recreate_runs_fresh_and_never_uploads(
    s3_remote: Remote, machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    m = _newer_remote(s3_remote, machines, tmp_path, "recreate")
    before = s3_remote.generation()
    local_runs = m.local_rows("SELECT run_id FROM run_history")
    result = m.rocky("run", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("newer than this engine supports") == 1
    assert f"has schema version {SCHEMA_VERSION + 1}, newer than this engine supports ({SCHEMA_VERSION})" in (
        result.stderr
    )
    assert "never uploaded" in result.stderr
    # A fresh local state: no watermark, so the incremental model was rebuilt in full.
    assert json.loads(result.stdout)["status"] == "Success"
    assert s3_remote.generation() == before, "a downgraded state must never reach the shared backend"
    assert m.local_rows("SELECT run_id FROM run_history") == local_runs  # the store on disk is untouched


def test_newer_remote_store_fail_refuses(
    s3_remote: Remote, machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    m = _newer_remote(s3_remote, machines, tmp_path, "fail")
    before = s3_remote.generation()
    result = m.rocky("run")
    assert result.returncode == 1
    assert (
        f"error: the remote state at s3://{s3_remote.s3.bucket}/{s3_remote.s3_prefix}state.sqlite"  # type: ignore[union-attr]
        in result.stderr
    )
    assert f"has schema version {SCHEMA_VERSION + 1}, newer than this engine supports ({SCHEMA_VERSION}); " \
        "upgrade rocky on every machine that shares this backend" in result.stderr
    assert s3_remote.generation() == before


def test_newer_local_store_is_never_uploaded(s3_remote: Remote, machines: Callable[[str], Machine]) -> None:
    m = machines("m")
    m.write(s3_remote.state_toml())
    m.seed("2024-01-01 00:00:00")
    m.state_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(m.state_path)
    conn.execute("CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(f"INSERT INTO metadata VALUES ('schema_version', '{SCHEMA_VERSION + 5}')")
    conn.commit()
    conn.close()
    result = m.rocky("run")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("newer than this engine supports") == 1
    assert s3_remote.snapshot() is None, "nothing may be uploaded from a downgraded store"


def test_namespaces_keep_separate_remote_state(
    s3_remote: Remote, machines: Callable[[str], Machine]
) -> None:
    m = machines("m")
    m.write(s3_remote.state_toml())
    m.seed("2024-01-01 00:00:00")
    assert m.rocky("--state-namespace", "tenant_a", "run").returncode == 0
    assert s3_remote.snapshot() is None
    assert s3_remote.s3 is not None
    key = f"{s3_remote.s3_prefix}ns/tenant_a/state.sqlite"
    assert s3_remote.s3.get(s3_remote.s3.bucket, key) is not None
