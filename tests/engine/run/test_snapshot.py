"""Snapshot (SCD-2) pipelines: insert, update, hard delete on and off, no-op reruns, bad input, on a real
DuckDB file and a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from conftest import WarehouseProject

    from tests.fixtures.postgres import PgDatabase

T1 = dt.datetime(2026, 1, 1)
T2 = dt.datetime(2026, 2, 1)
T3 = dt.datetime(2026, 3, 1)


@dataclass
class Backend:
    """One warehouse the snapshot runs on, seen through the test's own connection."""

    name: str
    wp: WarehouseProject
    sql: Callable[[str], Any]
    query: Callable[[str], list[tuple[Any, ...]]]
    adapter_toml: str
    catalog: str

    def configure(self, *, hard_deletes: bool = False, unique_key: str = '["id"]',
                  updated_at: str = "updated_at", extra: str = "") -> None:
        self.wp.write_config(
            self.adapter_toml
            + f"""
[pipeline.snap]
type = "snapshot"
unique_key = {unique_key}
updated_at = "{updated_at}"
invalidate_hard_deletes = {str(hard_deletes).lower()}
{extra}
[pipeline.snap.source]
catalog = "{self.catalog}"
schema = "raw"
table = "customers"
[pipeline.snap.target]
catalog = "{self.catalog}"
schema = "snapshots"
table = "customers_history"
"""
        )

    def history(self) -> list[tuple[Any, ...]]:
        return [
            (r[0], r[1], _naive(r[2]), _naive(r[3]))
            for r in self.query(
                "SELECT id, name, valid_from, valid_to FROM snapshots.customers_history "
                "ORDER BY id, valid_from"
            )
        ]


def _naive(value: Any) -> Any:
    return value.replace(tzinfo=None) if isinstance(value, dt.datetime) else value


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.services)])
def backend(request: pytest.FixtureRequest, wp: WarehouseProject) -> Backend:
    if request.param == "duckdb":
        return Backend(
            "duckdb", wp, lambda s: wp.sql(s), wp.query,
            '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n', "wh",
        )
    pg: PgDatabase = request.getfixturevalue("pg_db")
    return Backend(
        "postgres", wp, pg.sql, pg.sql, f'[adapter]\ntype = "postgres"\ndsn = "{pg.conninfo}"\n', pg.name
    )


def seed(b: Backend) -> None:
    b.sql("CREATE SCHEMA raw")
    b.sql("CREATE TABLE raw.customers (id INTEGER, name VARCHAR(20), updated_at TIMESTAMP)")
    b.sql("INSERT INTO raw.customers VALUES (1, 'ada', '2026-01-01'), (2, 'bob', '2026-01-01'), "
          "(3, 'cy', '2026-01-01')")


def run(b: Backend) -> Any:
    out = b.wp.run(pipeline="snap")
    assert out.status == "Success", out.errors
    [m] = out.materializations
    return m


def test_scd2_sequence(backend: Backend) -> None:
    b = backend
    seed(b)
    b.configure()
    first = run(b)
    assert first.asset_key == [b.catalog, "snapshots", "customers_history"]
    assert first.rows_copied == 3
    assert first.metadata.strategy == "snapshot"
    assert (first.metadata.rows_inserted, first.metadata.rows_closed) == (3, 0)
    assert b.history() == [(1, "ada", T1, None), (2, "bob", T1, None), (3, "cy", T1, None)]

    again = run(b)  # nothing changed: nothing written
    assert (again.rows_copied, again.metadata.rows_closed) == (0, 0)
    assert len(b.history()) == 3

    b.sql("UPDATE raw.customers SET name = 'ada2', updated_at = '2026-02-01' WHERE id = 1")
    b.sql("INSERT INTO raw.customers VALUES (4, 'dee', '2026-02-01')")
    changed = run(b)
    assert (changed.metadata.rows_inserted, changed.metadata.rows_closed) == (2, 1)
    assert changed.metadata.rows_hard_deleted is None
    assert b.history() == [
        (1, "ada", T1, T2), (1, "ada2", T2, None), (2, "bob", T1, None), (3, "cy", T1, None),
        (4, "dee", T2, None),
    ]

    # Hard deletes off: a key gone from the source stays current.
    b.sql("DELETE FROM raw.customers WHERE id = 2")
    off = run(b)
    assert (off.rows_copied, off.metadata.rows_closed) == (0, 0)
    assert (2, "bob", T1, None) in b.history()

    # Hard deletes on: the current version is closed at the run's start time.
    b.configure(hard_deletes=True)
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=1)
    on = run(b)
    after = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=1)
    assert (on.metadata.rows_inserted, on.metadata.rows_closed, on.metadata.rows_hard_deleted) == (0, 1, 1)
    [bob] = [r for r in b.history() if r[0] == 2]
    assert bob[2] == T1 and bob[3] is not None and before <= bob[3] <= after

    noop = run(b)
    assert (noop.rows_copied, noop.metadata.rows_closed, noop.metadata.rows_hard_deleted) == (0, 0, 0)

    # A deleted key that comes back opens a new version.
    b.sql("INSERT INTO raw.customers VALUES (2, 'bob', '2026-03-01')")
    back = run(b)
    assert (back.metadata.rows_inserted, back.metadata.rows_closed) == (1, 0)
    assert [r for r in b.history() if r[0] == 2][-1] == (2, "bob", T3, None)
    assert len(b.history()) == 6


def test_new_source_column_joins_the_history(backend: Backend) -> None:
    b = backend
    seed(b)
    b.configure()
    run(b)
    b.sql("ALTER TABLE raw.customers ADD COLUMN tier VARCHAR(10)")
    b.sql("UPDATE raw.customers SET tier = 'gold', updated_at = '2026-02-01' WHERE id = 3")
    m = run(b)
    assert (m.metadata.rows_inserted, m.metadata.rows_closed) == (1, 1)
    rows = b.query(
        "SELECT id, tier, valid_to FROM snapshots.customers_history WHERE id = 3 ORDER BY valid_from"
    )
    assert [(r[0], r[1], r[2] is None) for r in rows] == [(3, None, False), (3, "gold", True)]


def test_composite_key(backend: Backend) -> None:
    b = backend
    b.sql("CREATE SCHEMA raw")
    b.sql("CREATE TABLE raw.customers "
          "(id INTEGER, region VARCHAR(5), name VARCHAR(20), updated_at TIMESTAMP)")
    b.sql("INSERT INTO raw.customers VALUES (1, 'eu', 'a', '2026-01-01'), (1, 'us', 'b', '2026-01-01')")
    b.configure(unique_key='["id", "region"]')
    assert run(b).rows_copied == 2
    b.sql("UPDATE raw.customers SET name = 'b2', updated_at = '2026-02-01' WHERE region = 'us'")
    m = run(b)
    assert (m.metadata.rows_inserted, m.metadata.rows_closed) == (1, 1)


def test_duplicate_and_null_keys_fail_the_run_and_leave_the_target_alone(backend: Backend) -> None:
    b = backend
    seed(b)
    b.configure()
    run(b)
    b.sql("INSERT INTO raw.customers VALUES (1, 'ada-again', '2026-02-01')")
    out = b.wp.run(pipeline="snap")
    assert out.status == "Failure" and out.exit_code() == 1 and out.materializations == []
    [err] = out.errors
    assert err.asset_key == [b.catalog, "snapshots", "customers_history"]
    assert err.error == (
        f"snapshot source {b.catalog}.raw.customers has 1 duplicate unique_key value(s) (id); "
        "a snapshot needs one row per key"
    )
    assert len(b.history()) == 3
    b.sql("DELETE FROM raw.customers WHERE name = 'ada-again'")
    b.sql("INSERT INTO raw.customers VALUES (NULL, 'nobody', '2026-02-01')")
    out = b.wp.run(pipeline="snap")
    assert "1 row(s) with a NULL unique_key (id)" in out.errors[0].error


def test_bad_source_configuration(backend: Backend) -> None:
    b = backend
    b.configure()
    out = b.wp.run(pipeline="snap")
    assert out.status == "Failure"
    assert (out.errors[0].error, out.errors[0].failure_kind) == (
        f"snapshot source {b.catalog}.raw.customers does not exist", "not-found"
    )
    seed(b)
    b.configure(updated_at="modified")
    out = b.wp.run(pipeline="snap")
    assert out.errors[0].error.startswith(
        f"snapshot source {b.catalog}.raw.customers has no column(s) modified (columns: id, name, updated_at)"
    )
    b.sql("ALTER TABLE raw.customers ADD COLUMN valid_to TIMESTAMP")
    b.configure()
    out = b.wp.run(pipeline="snap")
    assert "already has column(s) valid_to" in out.errors[0].error


def test_target_that_is_not_a_snapshot_is_refused(backend: Backend) -> None:
    b = backend
    seed(b)
    b.sql("CREATE SCHEMA snapshots")
    b.sql("CREATE TABLE snapshots.customers_history (id INTEGER)")
    b.configure()
    out = b.wp.run(pipeline="snap")
    assert out.status == "Failure"
    assert "exists but has no valid_from / valid_to columns" in out.errors[0].error


def test_snapshot_cli_records_the_run_and_runs_advisory_checks(wp: WarehouseProject) -> None:
    b = Backend("duckdb", wp, lambda s: wp.sql(s), wp.query,
                '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n', "wh")
    seed(b)
    b.configure(extra='[pipeline.snap.checks]\nrow_count = true\nfreshness = { threshold_seconds = 60 }\n')
    res = wp.cli("run", "--pipeline", "snap", "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = res.json
    assert doc["pipeline_type"] == "snapshot" and doc["status"] == "Success" and doc["tables_copied"] == 1
    [m] = doc["materializations"]
    assert m["metadata"] == {
        "strategy": "snapshot", "target_table_full_name": "wh.snapshots.customers_history",
        "rows_inserted": 3, "rows_closed": 0,
    }
    [checks] = doc["check_results"]
    assert [(c["name"], c["passed"]) for c in checks["checks"]] == [("row_count", True), ("freshness", False)]
    [record] = wp.runs()
    assert record.pipeline_type == "snapshot" and record.status == "Success"
    assert record.models_executed[0].model_name == "wh.snapshots.customers_history"
    assert record.models_executed[0].rows_affected == 3


def test_source_and_target_on_different_adapters_is_a_config_error(wp: WarehouseProject) -> None:
    wp.write_config("""
        [adapter.a]
        type = "duckdb"
        path = "a.duckdb"
        [adapter.b]
        type = "duckdb"
        path = "b.duckdb"
        [pipeline.snap]
        type = "snapshot"
        unique_key = "id"
        updated_at = "u"
        source = { adapter = "a", catalog = "a", schema = "s", table = "t" }
        target = { adapter = "b", catalog = "b", schema = "s", table = "t" }
    """)
    with pytest.raises(ConfigError, match="snapshot source adapter 'a' differs from target adapter 'b'"):
        wp.run(pipeline="snap")
    res = wp.cli("run", "--pipeline", "snap")
    assert res.returncode == 1 and "put both on the same adapter" in res.stderr
