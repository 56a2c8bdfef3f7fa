"""A PostgreSQL error that quotes the adapter's DSN (a model casting a stored connection string to an
integer: PostgreSQL echoes the value) reaches neither the run document, nor the log, nor the run record:
the DSN and its password are named, never shown. Real PostgreSQL (tests/fixtures/postgres.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.redact.scan import leaks
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.postgres import PG_PASSWORD, PgDatabase

pytestmark = pytest.mark.services


def test_a_postgres_error_with_the_dsn_is_redacted(
    tmp_path: Path, pg_db: PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = f"postgresql://rocky:{PG_PASSWORD}@127.0.0.1:{pg_db.server.port}/{pg_db.name}"
    pg_db.sql("CREATE TABLE public.sources (dsn text)")
    pg_db.sql(f"INSERT INTO public.sources VALUES ('{dsn}')")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "counts.sql").write_text("SELECT CAST(dsn AS integer) AS n FROM public.sources\n")
    (tmp_path / "rocky.toml").write_text(
        '[adapter]\ntype = "postgres"\ndsn = "${PG_DSN}"\n\n'
        '[pipeline.models]\ntype = "transformation"\nmodels = "models/**"\n'
    )
    monkeypatch.setenv("PG_DSN", dsn)
    run = rocky_in_process(["-c", str(tmp_path / "rocky.toml"), "--output", "json", "run"])
    assert run.returncode == 1, run.stderr
    doc = run.stdout
    assert "invalid input syntax for type integer" in doc and "${PG_DSN}" in doc, doc
    assert leaks(dsn, run.stdout, run.stderr, files=(tmp_path / "models" / ".rocky-state.db",)) == []
    assert leaks(PG_PASSWORD, run.stdout, run.stderr, files=(tmp_path / "models",)) == []
    assert json.loads(doc)["status"] == "Failure"
