"""Read-only commands migrate an older store on first open (issue 13 item 8).

Seed (deployment-contract.md): "A newer engine opens an older store. It migrates the store forward on
first open. Every command does this." A v1 store used to stay v1 after ``history`` or ``doctor``: readers
migrated a private copy in memory. Now each read-only command, a real ``rocky`` process opening a real v1
file (built with the v1 migration itself), leaves the file at the current version; only while another
writer holds the store (an older rocky still running) does it read the old file as it is.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.state import RunRecord, StateStore
from rocky_engine.state.schema import MIGRATIONS, SCHEMA_VERSION
from tests.engine.server.kit import serving
from tests.fixtures.projects import TRANSFORMATION_TOML, run_rocky

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
RUN_ID = "run-20260301-080000-000"

# An older engine: opens the store knowing only the v1 migration and holds its writer lock until stdin
# closes ("ready" once it holds it).
OLD_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rocky_engine.state import StateStore
    from rocky_engine.state.schema import MIGRATIONS
    store = StateStore.open(Path(sys.argv[1]), migrations=MIGRATIONS[:1])
    print("ready", flush=True)
    sys.stdin.read()
    store.close()
    """
)


def _project(root: Path) -> Path:
    """A transformation project whose store (models/.rocky-state.db) is a v1 file with one run."""
    config = root / "rocky.toml"
    config.write_text(TRANSFORMATION_TOML.format(pipeline="models"))
    (root / "models").mkdir()
    (root / "models" / "m.sql").write_text("select 1 as a\n")
    store = root / "models" / ".rocky-state.db"
    with StateStore.open(store, migrations=MIGRATIONS[:1]) as v1:
        assert v1.schema_version == 1
        v1.runs.insert(
            RunRecord(
                run_id=RUN_ID, pipeline="models", started_at=T0, finished_at=T0 + timedelta(seconds=2),
                status="Success",
            )
        )
        v1.watermarks.set("wh.raw.orders", "17", now=T0)
    return store


def _version(store: Path) -> int:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        version = int(conn.execute("SELECT value FROM metadata WHERE key = 'schema_version'").fetchone()[0])
        columns = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    finally:
        conn.close()
    # the version says what the tables are: v2 added jobs.owner and jobs.attempts
    assert ({"owner", "attempts"} <= columns) == (version >= 2)
    return version


#: read-only commands (argv after -c CONFIG), their exit code, and a fact of the v1 store they must show
READERS = [
    (["history"], 0, RUN_ID),
    (["history", "--audit"], 0, RUN_ID),
    (["state"], 0, "wh.raw.orders"),
    (["doctor", "--check", "state"], 0, "1 run(s) recorded"),
    (["doctor", "--check", "state_schema"], 0, f"schema version {SCHEMA_VERSION} (current)"),
    (["brief", "--since", "7d", "--now", "2026-03-01T09:00:00Z"], 0, RUN_ID),
    (["tick", "--dry-run"], 0, '"command": "tick"'),
]


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "code", "fact"), READERS, ids=[" ".join(a) for a, *_ in READERS])
def test_a_read_only_command_migrates_a_v1_store(
    tmp_path: Path, argv: list[str], code: int, fact: str
) -> None:
    store = _project(tmp_path)
    assert _version(store) == 1
    result = run_rocky(["-c", str(tmp_path / "rocky.toml"), *argv, "--output", "json"], cwd=tmp_path)
    assert result.returncode == code, result.stderr
    assert fact in result.stdout, result.stdout
    assert _version(store) == SCHEMA_VERSION
    assert "error" not in result.stderr


@pytest.mark.slow
def test_rocky_serve_migrates_a_v1_store_and_lists_its_runs(tmp_path: Path) -> None:
    store = _project(tmp_path)
    with serving(tmp_path, "-c", str(tmp_path / "rocky.toml")) as server, server.client() as client:
        response = client.get("/api/v1/runs")
    assert response.status_code == 200, response.text
    assert RUN_ID in response.text
    assert _version(store) == SCHEMA_VERSION


@pytest.mark.slow
def test_with_the_writer_busy_the_old_store_is_read_as_it_is_and_migrated_later(tmp_path: Path) -> None:
    store = _project(tmp_path)
    before = store.read_bytes()
    older = subprocess.Popen(
        [sys.executable, "-c", OLD_WRITER, str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert older.stdin is not None and older.stdout is not None
    try:
        assert older.stdout.readline().strip() == "ready"
        busy = run_rocky(["-c", str(tmp_path / "rocky.toml"), "history", "--output", "json"], cwd=tmp_path)
        assert busy.returncode == 0, busy.stderr
        assert [r["run_id"] for r in json.loads(busy.stdout)["runs"]] == [RUN_ID]
        assert _version(store) == 1 and store.read_bytes() == before
        doctor = run_rocky(
            ["-c", str(tmp_path / "rocky.toml"), "doctor", "--check", "state_schema", "--output", "json"],
            cwd=tmp_path,
        )
        [check] = json.loads(doctor.stdout)["checks"]
        assert check["status"] == "warning" and "writer was busy" in check["message"], check
    finally:
        older.stdin.close()
        older.wait(timeout=30)
    after = run_rocky(["-c", str(tmp_path / "rocky.toml"), "history", "--output", "json"], cwd=tmp_path)
    assert after.returncode == 0 and RUN_ID in after.stdout
    assert _version(store) == SCHEMA_VERSION
