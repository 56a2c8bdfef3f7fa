"""Replication strategies on a real DuckDB warehouse: incremental, full_refresh, merge, metadata columns,
routing, exclusions, watermarks and the run output."""

from __future__ import annotations

import pytest

from tests.engine.replication.conftest import ReplicationProject


def test_incremental_first_and_second_pass(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=100)
    rp.source_table("src__payments", "payments", rows=50)
    first = rp.run()
    assert first.status == "Success" and first.exit_code() == 0
    assert first.tables_copied == 2 and first.tables_failed == 0
    by_key = {tuple(m.asset_key): m for m in first.materializations}
    assert set(by_key) == {("duckdb", "orders", "orders"), ("duckdb", "payments", "payments")}
    orders = by_key[("duckdb", "orders", "orders")]
    assert orders.rows_copied == 100
    assert orders.metadata.strategy == "incremental"
    assert orders.metadata.target_table_full_name == "wh.stg__orders.orders"
    assert orders.metadata.watermark == "2026-01-01T00:01:39Z"  # the stored value, in UTC with Z
    assert orders.metadata.column_count == 3
    assert first.permissions.schemas_created == 2
    assert rp.watermark("wh.stg__orders.orders") == "2026-01-01T00:01:39"

    rp.append("src__orders", "orders", start=100, rows=5)
    second = rp.run()
    assert second.status == "Success"
    rows = {tuple(m.asset_key): m.rows_copied for m in second.materializations}
    assert rows == {("duckdb", "orders", "orders"): 5, ("duckdb", "payments", "payments"): 0}
    assert rp.count("stg__orders.orders") == 105
    assert rp.watermark("wh.stg__orders.orders") == "2026-01-01T00:01:44"
    assert second.permissions.schemas_created == 0
    assert second.run_id != first.run_id


def test_incremental_lower_bound_is_the_stored_watermark(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=10)
    rp.run()
    # A row older than the watermark arriving late is not copied (the contract's WHERE ts > watermark).
    rp.sql("INSERT INTO src__orders.orders VALUES (99, 'late', TIMESTAMP '2025-12-31')")
    out = rp.run()
    assert out.materializations[0].rows_copied == 0
    assert rp.count("stg__orders.orders") == 10


def test_incremental_without_watermark_rebuilds_instead_of_duplicating(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=10)
    rp.run()
    from rocky_engine.state.store import StateStore

    with StateStore.open(rp.state_path) as store:
        store.watermarks.delete("wh.stg__orders.orders")
    out = rp.run()
    assert out.materializations[0].rows_copied == 10
    assert rp.count("stg__orders.orders") == 10
    assert rp.watermark("wh.stg__orders.orders") == "2026-01-01T00:00:09"


def test_watermark_never_advances_for_a_failed_table(rp: ReplicationProject) -> None:
    # A metadata expression that fails only for rows with id >= 1000 makes the second copy of `orders` fail.
    rp.configure(extra="""
        [[pipeline.raw.metadata_columns]]
        name = "_guard"
        type = "INTEGER"
        value = "CASE WHEN id >= 1000 THEN error('poisoned row') ELSE 1 END"
    """)
    rp.source_table("src__orders", "orders", rows=10)
    rp.source_table("src__payments", "payments", rows=10)
    rp.run()
    before = rp.watermark("wh.stg__orders.orders")
    rp.append("src__orders", "orders", start=1000, rows=3)
    rp.append("src__payments", "payments", start=10, rows=3)
    out = rp.run()
    assert out.status == "PartialFailure" and out.exit_code() == 2
    assert [e.asset_key for e in out.errors] == [["duckdb", "orders", "orders"]]
    assert "poisoned row" in out.errors[0].error
    assert rp.watermark("wh.stg__orders.orders") == before
    assert rp.count("stg__orders.orders") == 10
    assert rp.watermark("wh.stg__payments.payments") == "2026-01-01T00:00:12"


def test_full_refresh_replaces_the_table(rp: ReplicationProject) -> None:
    rp.configure(strategy="full_refresh")
    rp.source_table("src__orders", "orders", rows=10)
    rp.run()
    rp.sql("DELETE FROM src__orders.orders WHERE id < 5")
    out = rp.run()
    m = out.materializations[0]
    assert m.rows_copied == 5 and m.metadata.strategy == "full_refresh" and m.metadata.watermark is None
    assert rp.count("stg__orders.orders") == 5
    assert out.drift.tables_checked == 0
    assert rp.watermark("wh.stg__orders.orders") is None


def test_merge_upserts_by_key_and_keeps_the_newest_version(rp: ReplicationProject) -> None:
    rp.configure(strategy="merge", extra='merge_keys = ["id"]')
    rp.source_table("src__orders", "orders", rows=5)
    rp.run()
    rp.sql(
        "INSERT INTO src__orders.orders VALUES (1, 'v1-new', TIMESTAMP '2026-02-01'), "
        "(1, 'v1-newest', TIMESTAMP '2026-02-02'), (7, 'v7', TIMESTAMP '2026-02-01')"
    )
    out = rp.run()
    assert out.status == "Success"
    assert out.materializations[0].rows_copied == 2
    rows = dict(rp.query("SELECT id, v FROM stg__orders.orders ORDER BY id"))
    assert rows == {0: "v0", 1: "v1-newest", 2: "v2", 3: "v3", 4: "v4", 7: "v7"}
    assert rp.watermark("wh.stg__orders.orders") == "2026-02-02T00:00:00"


def test_merge_without_timestamp_column_upserts_everything(rp: ReplicationProject) -> None:
    rp.configure(strategy="merge", extra='merge_keys = ["id"]')
    rp.sql("CREATE SCHEMA src__kv",
           "CREATE TABLE src__kv.kv AS SELECT range AS id, range * 10 AS val FROM range(3)")
    rp.run()
    rp.sql("UPDATE src__kv.kv SET val = 99 WHERE id = 2")
    out = rp.run()
    assert out.status == "Success"
    assert rp.query("SELECT id, val FROM stg__kv.kv ORDER BY id") == [(0, 0), (1, 10), (2, 99)]


def test_merge_key_missing_is_a_table_error(rp: ReplicationProject) -> None:
    rp.configure(strategy="merge", extra='merge_keys = ["order_id"]')
    rp.source_table("src__orders", "orders", rows=3)
    out = rp.run()
    assert out.status == "Failure" and out.exit_code() == 1
    assert out.errors[0].failure_kind == "query-rejected"
    assert out.errors[0].error.startswith(
        "merge key order_id is not a column of source table src__orders.orders"
    )


def test_metadata_columns(rp: ReplicationProject) -> None:
    rp.configure(extra="""
        metadata_columns = [
          { name = "_loaded_by", type = "VARCHAR", value = "'rocky'" },
          { name = "_loaded_at", type = "TIMESTAMP", value = "CURRENT_TIMESTAMP" },
        ]
    """)
    rp.source_table("src__orders", "orders", rows=3)
    out = rp.run()
    assert out.materializations[0].metadata.column_count == 5
    rp.append("src__orders", "orders", start=3, rows=2)
    out = rp.run()
    assert out.drift.tables_drifted == 0  # metadata columns exist only in the target: not drift
    assert rp.query("SELECT DISTINCT _loaded_by FROM stg__orders.orders") == [("rocky",)]
    assert rp.query("SELECT count(*) FROM stg__orders.orders WHERE _loaded_at IS NOT NULL") == [(5,)]


def test_variadic_routing_and_asset_keys(rp: ReplicationProject) -> None:
    rp.configure(components='["tenant", "regions..."]', schema_template="stg__{tenant}__{regions}")
    rp.source_table("src__acme__us__west", "orders", rows=2)
    rp.source_table("src__globex__eu", "orders", rows=3)
    out = rp.run()
    keys = sorted(m.asset_key for m in out.materializations)
    assert keys == [["duckdb", "acme", "us__west", "orders"], ["duckdb", "globex", "eu", "orders"]]
    assert rp.count("stg__acme__us__west.orders") == 2
    assert rp.count("stg__globex__eu.orders") == 3


def test_misfit_schema_is_skipped_with_a_warning(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=2)
    rp.source_table("src__a__b", "x", rows=2)
    result = rp.cli("run", "--pipeline", "raw", "--output", "json")
    assert result.returncode == 0, result.stderr
    assert result.json["tables_copied"] == 1
    assert ("schema 'src__a__b' does not match the pattern src__<source> (expected 1 component after "
            "'src__', found 2); skipped") in result.stderr


def test_excluded_tables(rp: ReplicationProject) -> None:
    rp.configure(extra='excluded_tables = ["audit_*", "src__payments.refunds"]')
    rp.source_table("src__orders", "orders", rows=2)
    rp.source_table("src__orders", "audit_log", rows=2)
    rp.source_table("src__payments", "refunds", rows=2)
    rp.source_table("src__payments", "payments", rows=2)
    out = rp.run()
    assert sorted(m.asset_key[-1] for m in out.materializations) == ["orders", "payments"]
    # the published shape: the asset key, where it is, and the pattern that left it out
    assert out.wire()["excluded_tables"] == [
        {"asset_key": ["duckdb", "orders", "audit_log"], "source_schema": "src__orders",
         "table_name": "audit_log", "reason": "excluded_tables pattern 'audit_*'"},
        {"asset_key": ["duckdb", "payments", "refunds"], "source_schema": "src__payments",
         "table_name": "refunds", "reason": "excluded_tables pattern 'src__payments.refunds'"},
    ]
    from rocky_sdk.types import RunResult as PublishedRun

    assert len(PublishedRun.model_validate(out.wire()).excluded_tables) == 2


def test_routing_collision_is_a_config_error(rp: ReplicationProject) -> None:
    rp.configure(schema_template="staging")
    rp.source_table("src__a", "orders", rows=1)
    rp.source_table("src__b", "orders", rows=1)
    result = rp.cli("run", "--pipeline", "raw")
    assert result.returncode == 1
    assert "source tables src__a.orders and src__b.orders both route to wh.staging.orders" in result.stderr


def test_source_schema_that_is_also_a_target_is_not_copied_into_itself(rp: ReplicationProject) -> None:
    rp.configure(schema_template="src__{source}")
    rp.source_table("src__orders", "orders", rows=1)
    out = rp.run()
    assert out.tables_copied == 0 and out.status == "Success"


def test_missing_target_schema_without_auto_create(rp: ReplicationProject) -> None:
    rp.configure(sections="""
        [pipeline.raw.target.governance]
        auto_create_schemas = false
    """)
    rp.source_table("src__orders", "orders", rows=1)
    rp.source_table("src__payments", "payments", rows=1)
    rp.sql("CREATE SCHEMA stg__payments")
    out = rp.run()
    assert out.status == "PartialFailure"
    errors = [(e.asset_key, e.failure_kind) for e in out.errors]
    assert errors == [(["duckdb", "orders", "orders"], "not-found")]
    assert out.errors[0].error.startswith("target schema 'wh.stg__orders' does not exist")
    assert out.permissions.schemas_created == 0


def test_target_catalog_mismatch_is_a_table_error(rp: ReplicationProject) -> None:
    rp.configure()
    text = rp.config.read_text()
    rp.config.write_text(text.replace('catalog_template = "wh"', 'catalog_template = "lake"'))
    rp.source_table("src__orders", "orders", rows=1)
    out = rp.run()
    assert out.status == "Failure"
    assert out.errors[0].error.startswith(
        "target catalog 'lake' (catalog_template) is not the catalog of adapter 'default' ('wh')"
    )


def test_incremental_without_timestamp_column(rp: ReplicationProject) -> None:
    rp.sql("CREATE SCHEMA src__kv", "CREATE TABLE src__kv.kv AS SELECT 1 AS id")
    rp.source_table("src__orders", "orders", rows=1)
    out = rp.run()
    assert out.status == "PartialFailure"
    assert out.errors[0].asset_key == ["duckdb", "kv", "kv"]
    assert out.errors[0].failure_kind == "query-rejected"
    assert out.errors[0].error == (
        "timestamp column 'ts' is not a column of source table src__kv.kv; set timestamp_column to the "
        "table's change timestamp, or use strategy = \"full_refresh\""
    )


def test_run_record_and_progress(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=3)
    out = rp.run()
    with rp.store() as store:
        record = store.runs.get(out.run_id or "")
        assert record is not None and record.pipeline_type == "replication"
        assert [m.model_name for m in record.models_executed] == ["wh.stg__orders.orders"]
        assert record.models_executed[0].rows_affected == 3
        assert store.progress.completed_keys(out.run_id or "") == {"wh.stg__orders.orders"}


@pytest.mark.parametrize("concurrency", ["1", "3", '"adaptive"'])
def test_many_tables_at_any_concurrency(rp: ReplicationProject, concurrency: str) -> None:
    rp.configure(sections=f"""
        [pipeline.raw.execution]
        concurrency = {concurrency}
    """)
    rp.sql("CREATE SCHEMA src__many", *(
        f"CREATE TABLE src__many.t{i} AS SELECT range AS id, "
        f"TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range({i + 1})" for i in range(12)
    ))
    out = rp.run()
    assert out.status == "Success" and out.tables_copied == 12
    assert sorted(m.rows_copied or 0 for m in out.materializations) == list(range(1, 13))
    expected = 4 if concurrency == '"adaptive"' else int(concurrency)
    assert out.execution.concurrency >= expected


def test_between_two_duckdb_files(rp: ReplicationProject) -> None:
    """Different warehouses: rows stream through Arrow, scanned by the same statements as one warehouse."""
    rp.write_config("""\
        [adapter.lake]
        type = "duckdb"
        path = "lake.duckdb"

        [adapter.default]
        type = "duckdb"
        path = "wh.duckdb"

        [pipeline.raw]
        type = "replication"
        timestamp_column = "ts"

        [[pipeline.raw.metadata_columns]]
        name = "_src"
        type = "VARCHAR"
        value = "'lake'"

        [pipeline.raw.source]
        adapter = "lake"

        [pipeline.raw.source.schema_pattern]
        prefix = "src"
        separator = "__"
        components = ["source"]

        [pipeline.raw.target]
        adapter = "default"
        catalog_template = "wh"
        schema_template = "stg__{source}"
    """)
    lake = ReplicationProject(rp.root)
    import duckdb

    con = duckdb.connect(str(rp.root / "lake.duckdb"))
    con.execute("CREATE SCHEMA src__shop")
    con.execute("CREATE TABLE src__shop.orders AS SELECT range::INTEGER AS id, uuid() AS u, [range] AS l, "
                "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range(70000)")
    con.close()
    first = lake.run()
    assert first.status == "Success", first.errors
    assert first.materializations[0].rows_copied == 70000
    types = dict(rp.query("SELECT column_name, data_type FROM information_schema.columns "
                          "WHERE table_schema = 'stg__shop'"))
    assert types == {"id": "INTEGER", "u": "UUID", "l": "BIGINT[]", "ts": "TIMESTAMP", "_src": "VARCHAR"}
    con = duckdb.connect(str(rp.root / "lake.duckdb"))
    con.execute("INSERT INTO src__shop.orders SELECT range, uuid(), [range], TIMESTAMP '2026-02-01' "
                "FROM range(70000, 70003)")
    con.execute("ALTER TABLE src__shop.orders ALTER COLUMN id TYPE BIGINT")
    con.close()
    second = lake.run()
    assert second.status == "Success", second.errors
    assert second.materializations[0].rows_copied == 3
    assert [a.action for a in second.drift.actions_taken] == ["alter_column_type"]
    assert rp.count("stg__shop.orders") == 70003
    assert rp.query("SELECT DISTINCT _src FROM stg__shop.orders") == [("lake",)]
