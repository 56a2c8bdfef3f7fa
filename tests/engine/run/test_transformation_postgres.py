"""`rocky run` of a transformation pipeline on a real PostgreSQL: every strategy, reruns, secrets.

The password reaches the engine only through `${ROCKY_PG_PASSWORD}` in rocky.toml; it must never show up
in stdout or stderr, not even when the login fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.postgres import PG_PASSWORD, PgDatabase, free_port

pytestmark = pytest.mark.services

MODELS: dict[str, str] = {
    "stg_events.sql": "SELECT id, category, amount, updated_at FROM public.raw_events",
    "events_view.sql": "SELECT id, amount FROM stg_events WHERE amount > 0",
    "events_view.toml": '[strategy]\ntype = "view"\n',
    "events_inc.sql": "SELECT id, amount, updated_at FROM stg_events",
    "events_inc.toml": '[strategy]\ntype = "incremental"\ntimestamp_column = "updated_at"\n',
    "events_merge.sql": "SELECT id, category, amount FROM stg_events",
    "events_merge.toml": '[strategy]\ntype = "merge"\nunique_key = ["id"]\n',
    "by_category.sql": (
        "SELECT category, count(*) AS n, sum(amount) AS total FROM stg_events GROUP BY category"
    ),
    "by_category.toml": '[strategy]\ntype = "delete_insert"\npartition_by = ["category"]\n',
    "big_events.sql": "SELECT id FROM stg_events WHERE amount >= 10",
    "big_events.toml": '[strategy]\ntype = "ephemeral"\n',
    "big_count.sql": "SELECT count(*) AS n FROM big_events",
    "_defaults.toml": '[target]\nschema = "analytics"\n',
}


def _project(root: Path, port: int, dbname: str, extra_models: dict[str, str] | None = None) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    for name, body in {**MODELS, **(extra_models or {})}.items():
        (root / "models" / name).write_text(body)
    (root / "rocky.toml").write_text(
        textwrap.dedent(
            f"""
            [adapter]
            type = "postgres"
            host = "127.0.0.1"
            port = {port}
            user = "rocky"
            password = "${{ROCKY_PG_PASSWORD}}"
            dbname = "{dbname}"

            [adapter.retry]
            initial_backoff_ms = 10
            max_retries = 2

            [pipeline.models]
            type = "transformation"
            """
        )
    )
    return root


def _rocky(root: Path, *args: str, password: str = PG_PASSWORD) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["ROCKY_PG_PASSWORD"] = password
    return subprocess.run(
        [sys.executable, "-m", "rocky_engine.cli.main", "-c", str(root / "rocky.toml"), "--output", "json",
         "run", *args],
        capture_output=True, text=True, env=env, cwd=root, timeout=120, check=False,
    )


def _doc(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert PG_PASSWORD not in proc.stdout and PG_PASSWORD not in proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _seed(db: PgDatabase) -> None:
    db.sql(
        "CREATE TABLE public.raw_events (id int PRIMARY KEY, category text, amount numeric(10,2), "
        "updated_at timestamp)"
    )
    db.sql(
        "INSERT INTO public.raw_events VALUES (1, 'a', 5, '2026-01-01 00:00'), "
        "(2, 'a', 10, '2026-01-02 00:00'), (3, 'b', 20, '2026-01-03 00:00')"
    )


@pytest.mark.slow
def test_every_strategy_materializes_and_reruns(pg_db: PgDatabase, tmp_path: Path) -> None:
    _seed(pg_db)
    root = _project(tmp_path, pg_db.server.port, pg_db.name)

    first = _rocky(root)
    doc = _doc(first)
    assert first.returncode == 0, first.stderr
    assert doc["status"] == "Success" and doc["tables_failed"] == 0
    by_key = {tuple(m["asset_key"]): m for m in doc["materializations"]}
    db = pg_db.name
    assert set(by_key) == {(db, "analytics", t) for t in (
        "stg_events", "events_view", "events_inc", "events_merge", "by_category", "big_count")}
    assert by_key[(db, "analytics", "stg_events")]["rows_copied"] == 3
    assert by_key[(db, "analytics", "stg_events")]["metadata"]["target_table_full_name"] == (
        f"{db}.analytics.stg_events"
    )
    assert by_key[(db, "analytics", "events_inc")]["metadata"]["watermark"] == "2026-01-03T00:00:00Z"
    assert doc["permissions"]["schemas_created"] == 1
    assert pg_db.sql("SELECT n FROM analytics.big_count") == [(2,)]
    kinds = {str(name): str(kind) for name, kind in pg_db.sql(
        "SELECT c.relname, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'analytics'"
    )}
    assert kinds == {"stg_events": "r", "events_view": "v", "events_inc": "r", "events_merge": "r",
                     "by_category": "r", "big_count": "r"}

    # New and changed source rows: each strategy applies them its own way on the second run.
    pg_db.sql("UPDATE public.raw_events SET amount = 7, updated_at = '2026-01-04 00:00' WHERE id = 1")
    pg_db.sql("INSERT INTO public.raw_events VALUES (4, 'c', 30, '2026-01-05 00:00')")
    pg_db.sql("INSERT INTO public.raw_events VALUES (5, NULL, 1, '2026-01-05 00:00')")
    second = _rocky(root)
    doc = _doc(second)
    assert second.returncode == 0, second.stderr
    assert doc["status"] == "Success"
    rows = {tuple(m["asset_key"])[2]: m.get("rows_copied") for m in doc["materializations"]}
    # stg_events has a dependent view (events_view): it is refreshed in place, the view survives.
    assert rows["stg_events"] == 5
    assert pg_db.sql("SELECT id, amount FROM analytics.events_view ORDER BY id") == [
        (1, Decimal("7.00")), (2, Decimal("10.00")), (3, Decimal("20.00")), (4, Decimal("30.00")),
        (5, Decimal("1.00"))]
    # incremental appends only rows past the watermark (the update of id 1, the new ids 4 and 5)
    assert rows["events_inc"] == 3
    assert pg_db.sql("SELECT id, amount FROM analytics.events_inc ORDER BY updated_at, id") == [
        (1, Decimal("5.00")), (2, Decimal("10.00")), (3, Decimal("20.00")), (1, Decimal("7.00")),
        (4, Decimal("30.00")), (5, Decimal("1.00"))]
    # merge updates matched keys and inserts the new ones
    assert pg_db.sql("SELECT id, category, amount FROM analytics.events_merge ORDER BY id") == [
        (1, "a", Decimal("7.00")), (2, "a", Decimal("10.00")), (3, "b", Decimal("20.00")),
        (4, "c", Decimal("30.00")), (5, None, Decimal("1.00"))]
    # delete_insert rewrites every partition present in the new result
    assert pg_db.sql("SELECT category, n, total FROM analytics.by_category ORDER BY category") == [
        ("a", 2, Decimal("17.00")), ("b", 1, Decimal("20.00")), ("c", 1, Decimal("30.00")),
        (None, 1, Decimal("1.00"))]
    assert pg_db.sql("SELECT n FROM analytics.big_count") == [(3,)]
    # A third run with unchanged data: the NULL partition is replaced, not duplicated.
    third = _rocky(root)
    assert third.returncode == 0, third.stderr
    assert pg_db.sql("SELECT count(*) FROM analytics.by_category WHERE category IS NULL") == [(1,)]
    assert pg_db.sql("SELECT count(*) FROM analytics.events_inc") == [(6,)]


def test_column_change_under_a_dependent_view_is_refused_with_its_names(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    _seed(pg_db)
    root = _project(tmp_path, pg_db.server.port, pg_db.name)
    assert _rocky(root).returncode == 0
    (root / "models" / "stg_events.sql").write_text(
        "SELECT id, category, amount, updated_at, 1 AS extra FROM public.raw_events"
    )
    proc = _rocky(root, "--model", "stg_events")
    doc = _doc(proc)
    assert proc.returncode == 1 and doc["status"] == "Failure"
    [error] = doc["errors"]
    assert error["failure_kind"] == "query-rejected"
    assert error["error"].startswith(
        f"cannot change the columns of {pg_db.name}.analytics.stg_events: views depend on it "
        "(analytics.events_view) and PostgreSQL cannot alter a table under a view"
    )
    # The failed refresh rolled back: the old table and its view are intact.
    assert pg_db.sql("SELECT count(*) FROM analytics.events_view") == [(3,)]


def test_a_view_that_drops_a_column_is_rebuilt(pg_db: PgDatabase, tmp_path: Path) -> None:
    _seed(pg_db)
    root = _project(tmp_path, pg_db.server.port, pg_db.name)
    assert _rocky(root).returncode == 0
    (root / "models" / "events_view.sql").write_text("SELECT id FROM stg_events")
    proc = _rocky(root, "--model", "events_view")
    assert proc.returncode == 0, proc.stderr
    assert [r[0] for r in pg_db.sql(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'events_view'"
    )] == ["id"]


def test_a_failing_model_is_contained_and_classified(pg_db: PgDatabase, tmp_path: Path) -> None:
    _seed(pg_db)
    root = _project(tmp_path, pg_db.server.port, pg_db.name, {
        "broken.sql": "SELEC id FROM stg_events",
        "missing_src.sql": "SELECT * FROM public.no_such_table",
    })
    proc = _rocky(root)
    doc = _doc(proc)
    assert proc.returncode == 2 and doc["status"] == "PartialFailure"
    errors = {e["asset_key"][2]: e for e in doc["errors"]}
    assert errors["broken"]["failure_kind"] == "compile-error"
    assert errors["broken"]["error"] == 'syntax error at or near "SELEC"'
    assert errors["missing_src"]["failure_kind"] == "not-found"
    assert errors["missing_src"]["error"] == 'relation "public.no_such_table" does not exist'
    assert doc["tables_copied"] == 6


def test_wrong_password_fails_in_one_line_without_showing_any_password(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    root = _project(tmp_path, pg_db.server.port, pg_db.name)
    wrong = "wrong-secret-5678"
    proc = _rocky(root, password=wrong)
    assert proc.returncode == 1
    for stream in (proc.stdout, proc.stderr):
        assert wrong not in stream and PG_PASSWORD not in stream
    assert (
        f"cannot connect to PostgreSQL adapter 'default' at 127.0.0.1:{pg_db.server.port}/{pg_db.name}: "
        "password authentication failed for user 'rocky'; check user and password of [adapter.default] "
        "(the password is not shown)"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unreachable_server_fails_after_retries_in_one_line(pg_db: PgDatabase, tmp_path: Path) -> None:
    port = free_port()
    root = _project(tmp_path, port, pg_db.name)
    proc = _rocky(root)
    assert proc.returncode == 1
    assert (
        f"cannot connect to PostgreSQL adapter 'default' at 127.0.0.1:{port}/{pg_db.name}: connection "
        "refused; check host/port and that the server is running"
    ) in proc.stderr
    assert proc.stderr.count("retry ") == 2  # max_retries = 2, each logged once
    assert PG_PASSWORD not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_sigint_cancels_the_statement_in_flight_without_retrying_it(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    import signal
    import time

    _seed(pg_db)
    root = _project(tmp_path, pg_db.server.port, pg_db.name, {"slow.sql": "SELECT 1 AS x FROM pg_sleep(60)"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["ROCKY_PG_PASSWORD"] = PG_PASSWORD
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocky_engine.cli.main", "-c", str(root / "rocky.toml"), "--output", "json",
         "run", "--model", "slow"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root,
    )
    try:
        deadline = time.monotonic() + 30
        while not pg_db.sql(
            "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(60)%' "
            "AND pid <> pg_backend_pid()"
        ):
            assert time.monotonic() < deadline and proc.poll() is None, "the slow model never started"
            time.sleep(0.05)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 20  # cancelled, not waited out
    doc = json.loads(out)
    assert doc["interrupted"] is True
    assert doc["errors"][0]["failure_kind"] == "unknown"
    assert "canceling statement due to user request" in doc["errors"][0]["error"]
    assert "retry" not in err
