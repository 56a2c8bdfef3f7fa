"""Every materialization strategy end to end on a real DuckDB warehouse file."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import pytest

from rocky_engine.errors import ModelError, RockyError, UsageError

if TYPE_CHECKING:
    from conftest import WarehouseProject

INCREMENTAL = '[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\n'


def events_source(wp: WarehouseProject, start: int, stop: int) -> None:
    wp.sql(
        "CREATE SCHEMA IF NOT EXISTS raw",
        "CREATE TABLE IF NOT EXISTS raw.events (id INTEGER, ts TIMESTAMP, v INTEGER)",
        f"INSERT INTO raw.events SELECT range, TIMESTAMP '2026-01-01' + INTERVAL (range) HOUR, range * 10 "
        f"FROM range({start}, {stop})",
    )


# ---------------------------------------------------------------------- full_refresh


def test_full_refresh_builds_and_replaces(wp: WarehouseProject) -> None:
    events_source(wp, 0, 5)
    wp.model("events_copy", "SELECT id, v FROM raw.events")
    out = wp.run()
    assert out.status == "Success"
    [mat] = out.materializations
    assert mat.asset_key == ["wh", "main", "events_copy"]
    assert mat.rows_copied == 5
    assert mat.metadata.strategy == "full_refresh"
    assert mat.metadata.watermark is None
    wp.sql("DELETE FROM raw.events WHERE id < 3")
    out = wp.run()
    assert out.materializations[0].rows_copied == 2
    assert wp.query("SELECT id FROM wh.main.events_copy ORDER BY id") == [(3,), (4,)]
    assert wp.relation_kind("main", "events_copy") == "BASE TABLE"


def test_target_schema_is_created_and_counted(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS x", '[target]\nschema = "marts"\ntable = "a_table"\n')
    out = wp.run()
    assert out.materializations[0].asset_key == ["wh", "marts", "a_table"]
    assert out.materializations[0].metadata.target_table_full_name == "wh.marts.a_table"
    assert out.permissions.schemas_created == 1
    assert wp.query("SELECT x FROM wh.marts.a_table") == [(1,)]
    assert wp.run().permissions.schemas_created == 0


# ---------------------------------------------------------------------- incremental


def test_incremental_inserts_only_new_rows_and_records_watermark(wp: WarehouseProject) -> None:
    events_source(wp, 0, 5)
    wp.model("events", "SELECT id, ts, v FROM raw.events", INCREMENTAL)
    first = wp.run()
    [mat] = first.materializations
    assert mat.rows_copied == 5
    assert mat.metadata.strategy == "incremental"
    assert mat.metadata.watermark == "2026-01-01T04:00:00Z"

    events_source(wp, 5, 8)  # three newer rows
    wp.sql("INSERT INTO raw.events VALUES (100, TIMESTAMP '2025-06-01', 0)")  # older than the watermark
    second = wp.run()
    [mat] = second.materializations
    assert mat.rows_copied == 3
    assert mat.metadata.watermark == "2026-01-01T07:00:00Z"
    assert wp.query("SELECT count(*), count(DISTINCT id), max(id) FROM wh.main.events") == [(8, 8, 7)]

    third = wp.run()
    assert third.materializations[0].rows_copied == 0
    assert third.materializations[0].metadata.watermark == "2026-01-01T07:00:00Z"

    state = wp.cli("state", "--output", "json")
    assert state.returncode == 0, state.stderr
    [wm] = state.json["watermarks"]
    # the run stores the watermark as it writes it: UTC with Z
    assert (wm["key"], wm["value"]) == ("wh.main.events", "2026-01-01T07:00:00Z")


def test_incremental_with_trailing_comment_and_semicolon(wp: WarehouseProject) -> None:
    # the compiled SELECT is wrapped in INSERT ... FROM (<sql>): a trailing comment must not eat the ")"
    events_source(wp, 0, 3)
    wp.model("events", "SELECT id, ts, v FROM raw.events; -- keep it simple", INCREMENTAL)
    assert wp.run().status == "Success"
    events_source(wp, 3, 4)
    out = wp.run()
    assert out.status == "Success", out.errors
    assert out.materializations[0].rows_copied == 1


def test_incremental_target_dropped_is_rebuilt(wp: WarehouseProject) -> None:
    events_source(wp, 0, 4)
    wp.model("events", "SELECT id, ts FROM raw.events", INCREMENTAL)
    wp.run()
    wp.sql("DROP TABLE wh.main.events")
    out = wp.run()
    assert out.materializations[0].rows_copied == 4


# ---------------------------------------------------------------------- merge


def customers_source(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.customers (id INTEGER, name VARCHAR, tier VARCHAR)",
        "INSERT INTO raw.customers VALUES (1, 'ann', 'gold'), (2, 'bob', 'silver'), (3, 'cy', 'bronze')",
    )


def test_merge_updates_and_inserts(wp: WarehouseProject) -> None:
    customers_source(wp)
    wp.model(
        "customers", "SELECT id, name, tier FROM raw.customers -- latest\n",
        '[strategy]\ntype = "merge"\nunique_key = "id"\n',
    )
    assert wp.run().materializations[0].rows_copied == 3
    wp.sql(
        "UPDATE raw.customers SET name = 'bobby', tier = 'gold' WHERE id = 2",
        "INSERT INTO raw.customers VALUES (4, 'dee', 'silver')",
        "DELETE FROM raw.customers WHERE id = 3",  # merge never deletes
    )
    out = wp.run()
    assert out.status == "Success", out.errors
    assert out.materializations[0].metadata.strategy == "merge"
    assert wp.query("SELECT id, name, tier FROM wh.main.customers ORDER BY id") == [
        (1, "ann", "gold"), (2, "bobby", "gold"), (3, "cy", "bronze"), (4, "dee", "silver"),
    ]


def test_merge_update_columns_limit_what_changes(wp: WarehouseProject) -> None:
    customers_source(wp)
    wp.model(
        "customers", "SELECT id, name, tier FROM raw.customers",
        '[strategy]\ntype = "merge"\nunique_key = ["id"]\nupdate_columns = ["name"]\n',
    )
    wp.run()
    wp.sql("UPDATE raw.customers SET name = 'ANN', tier = 'none' WHERE id = 1")
    assert wp.run().status == "Success"
    assert wp.query("SELECT name, tier FROM wh.main.customers WHERE id = 1") == [("ANN", "gold")]


def test_merge_composite_key(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.stock (store INTEGER, sku VARCHAR, qty INTEGER)",
        "INSERT INTO raw.stock VALUES (1, 'a', 5), (1, 'b', 6), (2, 'a', 7)",
    )
    wp.model(
        "stock", "SELECT * FROM raw.stock", '[strategy]\ntype = "merge"\nunique_key = ["store", "sku"]\n'
    )
    wp.run()
    wp.sql(
        "UPDATE raw.stock SET qty = 50 WHERE store = 1 AND sku = 'a'",
        "INSERT INTO raw.stock VALUES (2, 'b', 8)",
    )
    wp.run()
    assert wp.query("SELECT store, sku, qty FROM wh.main.stock ORDER BY ALL") == [
        (1, "a", 50), (1, "b", 6), (2, "a", 7), (2, "b", 8),
    ]


# ---------------------------------------------------------------------- view


def test_view_is_a_view_and_stays_current(wp: WarehouseProject) -> None:
    events_source(wp, 0, 3)
    wp.model("recent", "SELECT id FROM raw.events", '[strategy]\ntype = "view"\n')
    out = wp.run()
    [mat] = out.materializations
    assert mat.metadata.strategy == "view"
    assert mat.rows_copied is None
    assert "rows_copied" not in mat.wire()
    assert wp.relation_kind("main", "recent") == "VIEW"
    events_source(wp, 3, 5)
    assert wp.query("SELECT count(*) FROM wh.main.recent") == [(5,)]


def test_switching_between_table_and_view(wp: WarehouseProject) -> None:
    events_source(wp, 0, 3)
    path = wp.model("m", "SELECT id FROM raw.events")
    wp.run()
    assert wp.relation_kind("main", "m") == "BASE TABLE"
    path.with_suffix(".toml").write_text('[strategy]\ntype = "view"\n')
    assert wp.run().status == "Success"
    assert wp.relation_kind("main", "m") == "VIEW"
    path.with_suffix(".toml").write_text(INCREMENTAL.replace('"ts"', '"id"'))
    out = wp.run()
    assert out.status == "Success", out.errors
    assert wp.relation_kind("main", "m") == "BASE TABLE"
    assert wp.query("SELECT count(*) FROM wh.main.m") == [(3,)]


# ---------------------------------------------------------------------- ephemeral


def test_ephemeral_models_are_inlined_nested_and_never_materialized(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.orders AS SELECT range AS id, (range % 4) - 1 AS amount FROM range(8)",
    )
    eph = '[strategy]\ntype = "ephemeral"\n'
    wp.model("upstream", "SELECT id, amount FROM raw.orders")
    wp.model("eph_base", "SELECT id, amount FROM upstream WHERE amount > 0", eph)
    wp.model("eph_mid", "SELECT id, amount * 2 AS doubled FROM eph_base -- trailing comment", eph)
    wp.model(
        "final",
        """\
        -- leading comment before the WITH
        WITH extra AS (SELECT 1 AS one)
        SELECT m.id, m.doubled, extra.one FROM eph_mid m, extra;
        """,
    )
    wp.model("counts", "SELECT count(*) AS n FROM eph_base")
    out = wp.run()
    assert out.status == "Success", out.errors
    built = [m.asset_key[-1] for m in out.materializations]
    assert built[0] == "upstream" and sorted(built[1:]) == ["counts", "final"]
    assert wp.relation_kind("main", "eph_base") is None
    assert wp.relation_kind("main", "eph_mid") is None
    assert wp.query("SELECT id, doubled, one FROM wh.main.final ORDER BY id") == [
        (2, 2, 1), (3, 4, 1), (6, 2, 1), (7, 4, 1),
    ]
    assert wp.query("SELECT n FROM wh.main.counts") == [(4,)]
    assert out.tables_copied == 3
    assert {e.model_name for e in wp.runs()[0].models_executed} == {"upstream", "counts", "final"}


def test_model_flag_rejects_an_ephemeral_model(wp: WarehouseProject) -> None:
    wp.model("eph", "SELECT 1 AS x", '[strategy]\ntype = "ephemeral"\n')
    wp.model("user_a", "SELECT * FROM eph")
    with pytest.raises(UsageError) as info:
        wp.run(models=("eph",))
    assert str(info.value) == (
        "--model 'eph' is ephemeral: it is inlined into the models that use it (user_a) and never "
        "materialized on its own; run one of those models instead"
    )


# ---------------------------------------------------------------------- delete_insert


def test_delete_insert_replaces_partitions(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.sales (day DATE, region VARCHAR, amount INTEGER)",
        "INSERT INTO raw.sales VALUES ('2026-01-01', 'eu', 1), ('2026-01-01', 'us', 2), "
        "('2026-01-02', 'eu', 3)",
    )
    wp.model(
        "daily_sales",
        "SELECT day, region, amount FROM raw.sales WHERE day >= DATE '{{ var('since', '2026-01-01') }}'",
        '[strategy]\ntype = "delete_insert"\npartition_by = "day"\n',
    )
    assert wp.run().materializations[0].rows_copied == 3
    # day 2 restated (one row instead of one other), day 3 new; day 1 no longer selected
    wp.sql(
        "DELETE FROM raw.sales WHERE day = '2026-01-02'",
        "INSERT INTO raw.sales VALUES ('2026-01-02', 'us', 30), ('2026-01-02', 'apac', 31), "
        "('2026-01-03', 'eu', 40)",
    )
    out = wp.run(variables={"since": "2026-01-02"})
    assert out.status == "Success", out.errors
    assert out.materializations[0].metadata.strategy == "delete_insert"
    assert out.materializations[0].rows_copied == 3
    assert wp.query("SELECT day, region, amount FROM wh.main.daily_sales ORDER BY ALL") == [
        (dt.date(2026, 1, 1), "eu", 1),
        (dt.date(2026, 1, 1), "us", 2),
        (dt.date(2026, 1, 2), "apac", 31),
        (dt.date(2026, 1, 2), "us", 30),
        (dt.date(2026, 1, 3), "eu", 40),
    ]


def test_delete_insert_with_two_partition_columns(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.s (day INTEGER, region VARCHAR, amount INTEGER)",
        "INSERT INTO raw.s VALUES (1, 'eu', 1), (1, 'us', 2)",
    )
    wp.model(
        "s_by_region",
        "SELECT * FROM raw.s WHERE region = '{{ var('region', 'eu') }}' OR '{{ var('all', 'no') }}' = 'yes'",
        '[strategy]\ntype = "delete_insert"\npartition_by = ["day", "region"]\n',
    )
    wp.run(variables={"all": "yes"})
    wp.sql("UPDATE raw.s SET amount = amount * 100")
    assert wp.run(variables={"region": "us"}).status == "Success"
    assert wp.query("SELECT day, region, amount FROM wh.main.s_by_region ORDER BY ALL") == [
        (1, "eu", 1), (1, "us", 200),
    ]


# ---------------------------------------------------------------------- references and targets


def test_quoted_reference_to_a_model_is_rewritten_to_its_target(wp: WarehouseProject) -> None:
    wp.model("base", "SELECT 7 AS x", '[target]\nschema = "staging"\n')
    wp.model("uses_quoted", 'SELECT x FROM "base"')
    out = wp.run()
    assert out.status == "Success", out.errors
    assert wp.query("SELECT x FROM wh.main.uses_quoted") == [(7,)]


def test_two_models_writing_one_table_are_refused(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS x", '[target]\ntable = "shared"\n')
    wp.model("b", "SELECT 2 AS x", '[target]\ntable = "shared"\n')
    with pytest.raises(ModelError) as info:
        wp.run()
    assert str(info.value) == (
        "models 'a' and 'b' both write wh.main.shared; "
        "give one of them its own [target] table or schema in its sidecar"
    )


def test_target_catalog_other_than_the_adapter_is_refused(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS x", '[target]\ncatalog = "elsewhere"\n')
    with pytest.raises(RockyError) as info:
        wp.run()
    assert str(info.value) == (
        "model 'a' targets catalog 'elsewhere', but adapter 'default' is catalog 'wh'; "
        "fix [target] catalog in the model sidecar or models/_defaults.toml"
    )
    assert wp.runs() == []


def test_delete_insert_replaces_a_null_partition_instead_of_duplicating_it(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.s (day INTEGER, amount INTEGER)",
        "INSERT INTO raw.s VALUES (1, 1), (NULL, 2)",
    )
    wp.model("s_copy", "SELECT * FROM raw.s", '[strategy]\ntype = "delete_insert"\npartition_by = "day"\n')
    wp.run()
    wp.run()
    assert wp.query("SELECT day, amount FROM wh.main.s_copy ORDER BY ALL") == [(1, 1), (None, 2)]


def test_model_flag_on_an_unused_ephemeral_model(wp: WarehouseProject) -> None:
    wp.model("eph", "SELECT 1 AS x", '[strategy]\ntype = "ephemeral"\n')
    wp.model("user_b", "SELECT * FROM user_a")
    wp.model("user_a", "SELECT * FROM eph")
    wp.model("lonely", "SELECT 1 AS x", '[strategy]\ntype = "ephemeral"\n')
    with pytest.raises(UsageError, match=r"inlined into the models that use it \(user_a\)"):
        wp.run(models=("eph",))
    with pytest.raises(UsageError, match=r"inlined into the models that use it \(no model\)"):
        wp.run(models=("lonely",))
