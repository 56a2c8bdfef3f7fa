"""The capability probe reads what Spark can do without changing anything (checked on Parquet tables)."""

from __future__ import annotations

import pytest

from rocky_engine.adapters.spark.capabilities import SparkCapabilities, merge_supported, table_format
from rocky_engine.adapters.spark.connection import SparkConnection
from rocky_engine.adapters.spark.errors import SparkAdapterError
from tests.fixtures.spark_server import SPARK_VERSION


def test_probe_reports_the_parquet_level_of_a_plain_spark(spark_connection: SparkConnection) -> None:
    caps = spark_connection.capabilities()
    assert caps == SparkCapabilities(
        spark_version=SPARK_VERSION,
        catalog="spark_catalog",
        table_format="parquet",
        merge=False,
        relation_cache_size=1000,
    )
    assert not caps.atomic_replace
    assert caps.stale_reads


@pytest.mark.parametrize(
    ("table_format", "cache", "atomic", "stale"),
    [
        ("delta", 1000, True, False),
        ("iceberg", None, True, False),
        ("parquet", 0, False, False),
        ("orc", None, False, True),
    ],
)
def test_what_each_level_implies(table_format: str, cache: int | None, atomic: bool, stale: bool) -> None:
    caps = SparkCapabilities("4.3.0", "main", table_format, table_format != "orc", cache)
    assert (caps.atomic_replace, caps.stale_reads) == (atomic, stale)


def test_merge_probe_plans_without_touching_the_table(
    spark_connection: SparkConnection, spark_schema: str
) -> None:
    main = spark_connection.main
    main.execute(f"CREATE TABLE {spark_schema}.t USING parquet AS SELECT id FROM range(4)")
    main.execute(f"CREATE VIEW {spark_schema}.v AS SELECT id FROM {spark_schema}.t")
    before = main.query(f"SHOW TABLES IN {spark_schema}")
    assert merge_supported(main, f"{spark_schema}.t") is False
    assert main.query(f"SELECT count(*) FROM {spark_schema}.t") == [(4,)]
    assert main.query(f"SHOW TABLES IN {spark_schema}") == before
    # and what the probe predicts is what MERGE really does
    with pytest.raises(SparkAdapterError) as info:
        main.execute(
            f"MERGE INTO {spark_schema}.t USING (SELECT 1 AS id) s ON {spark_schema}.t.id = s.id "
            "WHEN MATCHED THEN DELETE"
        )
    assert (info.value.error_class, info.value.failure_kind) == (
        "UNSUPPORTED_FEATURE.TABLE_OPERATION",
        "query-rejected",
    )


def test_merge_probe_of_a_missing_table_is_not_found(
    spark_connection: SparkConnection, spark_schema: str
) -> None:
    with pytest.raises(SparkAdapterError) as info:
        merge_supported(spark_connection.main, f"{spark_schema}.missing")
    assert (info.value.failure_kind, info.value.error_class) == ("not-found", "TABLE_OR_VIEW_NOT_FOUND")


def test_table_format_reads_the_provider(spark_connection: SparkConnection, spark_schema: str) -> None:
    main = spark_connection.main
    main.execute(f"CREATE TABLE {spark_schema}.p USING parquet AS SELECT 1 AS a")
    main.execute(f"CREATE TABLE {spark_schema}.j USING json AS SELECT 1 AS a")
    main.execute(f"CREATE VIEW {spark_schema}.v AS SELECT 1 AS a")
    assert table_format(main, f"{spark_schema}.p") == "parquet"
    assert table_format(main, f"{spark_schema}.j") == "json"
    assert table_format(main, f"{spark_schema}.v") == "view"
    with pytest.raises(SparkAdapterError) as info:
        table_format(main, f"{spark_schema}.missing")
    assert info.value.failure_kind == "not-found"
