"""The reference PostgreSQL connector (examples/connectors/postgres/) against a real PostgreSQL server:
three loads, the rows held back at the maximum, ``commit_seq``, and the password nowhere on disk or in
any output."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.engine.connectors.kit import Cli, ConnectorProject
from tests.fixtures.postgres import PgDatabase

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "connectors" / "postgres"

CONFIG = """\
[adapter.default]
type = "duckdb"
path = "wh.duckdb"

[connector.pg_events]
manifest   = "connector/connector.toml"
output_uri = "file://./landing"
secrets    = ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"]
target     = { catalog = "wh", schema = "raw", table = "events" }
retries    = 0
keep_scratch = true
"""


def project(tmp_path: Path, db: PgDatabase, toolchain: Path, password: str | None = None) -> ConnectorProject:
    shutil.copytree(EXAMPLE, tmp_path / "connector", dirs_exist_ok=True)
    (tmp_path / "rocky.toml").write_text(CONFIG)
    server = db.server
    env = {
        "PATH": f"{toolchain / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "PGHOST": server.host, "PGPORT": str(server.port), "PGUSER": server.user,
        "PGPASSWORD": password or server.password, "PGDATABASE": db.name,
    }
    return ConnectorProject(tmp_path, name="pg_events", env=env)


def no_password_anywhere(cp: ConnectorProject, password: str, *outputs: Cli) -> None:
    needle = password.encode()
    for out in outputs:
        assert password not in out.stdout and password not in out.stderr
    for path in cp.root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert needle not in path.read_bytes(), f"the password is in {path}"


def cursor(cp: ConnectorProject) -> str | None:
    state = cp.state()
    assert state is not None
    value: str | None = json.loads(state["value"])["cursor"]
    return value


@pytest.mark.services
@pytest.mark.slow
def test_three_loads(tmp_path: Path, pg_db: PgDatabase, duckdb_pg_toolchain: Path) -> None:
    pg_db.sql("CREATE TABLE public.events (id integer, payload text, updated_at timestamptz)")
    pg_db.sql(
        "INSERT INTO public.events VALUES "
        "(1, 'a', '2026-10-01 00:00:00+00'), (2, 'b', '2026-10-01 00:10:00+00'), "
        "(3, 'c', '2026-10-01 00:19:00+00'), (4, 'd', '2026-10-01 00:19:00+00'), (9, 'null', NULL)"
    )
    cp = project(tmp_path, pg_db, duckdb_pg_toolchain)
    password = pg_db.server.password

    # 1: everything below the maximum M (00:19); both rows at M wait together; NULLs are skipped
    first = cp.load()
    assert first.returncode == 0, first.stderr
    assert first.connector["commit_seq_before"] == 0 and first.connector["commit_seq_after"] == 1
    assert first.json["total_rows"] == 2
    assert cp.rows("SELECT id FROM wh.raw.events ORDER BY id") == [(1,), (2,)]
    assert cursor(cp) == "2026-10-01T00:10:00.000000Z"

    # 2: a newer row arrives: the tied rows land together, the newest waits
    pg_db.sql("INSERT INTO public.events VALUES (5, 'e', '2026-10-01 00:25:00+00')")
    second = cp.load()
    assert second.returncode == 0, second.stderr
    assert second.connector["commit_seq_after"] == 2 and second.json["total_rows"] == 2
    assert cp.rows("SELECT id FROM wh.raw.events ORDER BY id") == [(1,), (2,), (3,), (4,)]
    assert cursor(cp) == "2026-10-01T00:19:00.000000Z"

    # 3: a quiet source: nothing qualifies, no file, the state is still saved
    third = cp.load()
    assert third.returncode == 0, third.stderr
    assert third.json["files"] == [] and third.connector["status"] == "loaded"
    assert third.connector["commit_seq_before"] == 2 and third.connector["commit_seq_after"] == 3
    assert cp.count() == 4  # id 5 is held back until a newer row exists
    assert cursor(cp) == "2026-10-01T00:19:00.000000Z"
    assert cp.rows("SELECT payload, updated_at FROM wh.raw.events WHERE id = 3")[0][0] == "c"

    assert len(cp.scratch_dirs()) == 3  # keep_scratch: every run's scratch directory is there to inspect
    assert "no new rows below the newest updated_at value" in third.stderr
    no_password_anywhere(cp, password, first, second, third)


@pytest.mark.services
def test_wrong_password_fails_without_leaking_it(
    tmp_path: Path, pg_db: PgDatabase, duckdb_pg_toolchain: Path
) -> None:
    pg_db.sql("CREATE TABLE public.events (id integer, updated_at timestamptz)")
    wrong = "wrong-password-987654"
    cp = project(tmp_path, pg_db, duckdb_pg_toolchain, password=wrong)
    res = cp.load()
    assert res.returncode == 1
    assert res.connector["error"] == "all 1 attempt(s) failed; the last one: the program exited with code 2"
    assert "pg_connector: duckdb exited with code 1" in res.stderr
    no_password_anywhere(cp, wrong, res)
