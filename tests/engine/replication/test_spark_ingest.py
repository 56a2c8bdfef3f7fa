"""The Spark side of the copy seam on a real Spark Connect server: Arrow batches in (uploaded, or staged as
Parquet in a directory the server shares), a Spark SELECT out as streamed Arrow batches; types exact."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from rocky_engine.adapters.spark import ingest, source
from rocky_engine.adapters.spark.connection import SparkConnection
from rocky_engine.errors import AdapterError

UTC = dt.UTC
SOURCE_SQL = (
    "SELECT range AS id, 'n' || range AS name, (range * 1.25)::DECIMAL(12,2) AS amount, "
    "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts, "
    "TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_hours(range) AS tz, "
    "CASE WHEN range % 3 = 0 THEN NULL ELSE range::INTEGER END AS maybe FROM range(?)"
)


def _readers(rows: int, parts: int = 1) -> list[Any]:
    con = duckdb.connect()
    out = []
    for _ in range(parts):
        rel: Any = con.cursor().sql(SOURCE_SQL, params=[rows])
        out.append(rel.to_arrow_reader(7) if hasattr(rel, "to_arrow_reader") else rel.record_batch(7))
    return out


@pytest.mark.parametrize("staged", [False, True], ids=["arrow", "parquet"])
def test_batches_land_with_exact_types(
    spark_connection: SparkConnection, spark_schema: str, tmp_path: Path, staged: bool
) -> None:
    session = spark_connection.session()
    staging = tmp_path / "stage" if staged else None
    if staging is not None:
        staging.mkdir()
    with ingest.scan_arrow(session, "__rocky_stage_t", _readers(20, parts=2), staging_dir=staging) as rel:
        session.execute(f"CREATE TABLE {spark_schema}.t USING parquet AS SELECT * FROM {rel}")
        assert session.query(f"SELECT count(*) FROM {rel}") == [(40,)]  # readable more than once
    types = [(r[0], r[1]) for r in session.query(f"DESCRIBE TABLE {spark_schema}.t")]
    assert types == [("id", "bigint"), ("name", "string"), ("amount", "decimal(12,2)"),
                     ("ts", "timestamp_ntz"), ("tz", "timestamp"), ("maybe", "int")]
    rows = session.query(f"SELECT DISTINCT * FROM {spark_schema}.t WHERE id IN (0, 5) ORDER BY id")
    assert rows == [
        (0, "n0", Decimal("0.00"), dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 1, tzinfo=UTC), None),
        (5, "n5", Decimal("6.25"), dt.datetime(2026, 1, 1, 0, 0, 5), dt.datetime(2026, 1, 1, 5, tzinfo=UTC),
         5),
    ]
    assert session.query(f"SELECT sum(id), count(maybe) FROM {spark_schema}.t") == [(380, 26)]
    if staging is not None:
        assert list(staging.iterdir()) == []  # the staged Parquet is removed after the copy
    else:  # the temporary view is gone with the block
        assert not session.query("SHOW VIEWS LIKE '__rocky_stage_t'")


@pytest.mark.parametrize("staged", [False, True], ids=["arrow", "parquet"])
def test_no_rows_still_has_the_columns(
    spark_connection: SparkConnection, spark_schema: str, tmp_path: Path, staged: bool
) -> None:
    session = spark_connection.session()
    staging = tmp_path if staged else None
    with ingest.scan_arrow(session, "__rocky_stage_e", _readers(0), staging_dir=staging) as rel:
        session.execute(f"CREATE TABLE {spark_schema}.e USING parquet AS SELECT * FROM {rel}")
    assert [r[1] for r in session.query(f"DESCRIBE TABLE {spark_schema}.e")] == [
        "bigint", "string", "decimal(12,2)", "timestamp_ntz", "timestamp", "int"]
    assert session.query(f"SELECT count(*) FROM {spark_schema}.e") == [(0,)]


def test_a_select_streams_out_as_arrow(
    spark_connection: SparkConnection, spark_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = spark_connection.session()
    with ingest.scan_arrow(session, "__rocky_stage_s", _readers(10), staging_dir=None) as rel:
        session.execute(f"CREATE TABLE {spark_schema}.s USING parquet AS SELECT * FROM {rel}")
    # A naive datetime parameter compares as wall-clock time, whatever the client's time zone (pyspark
    # alone would read it as local time: here 5 hours off).
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    sql = (f"SELECT id, ts, tz, amount, maybe FROM {spark_schema}.s WHERE ts > CAST(? AS TIMESTAMP_NTZ) "
           "ORDER BY id")
    try:
        with source.read_arrow(session, sql, [dt.datetime(2026, 1, 1, 0, 0, 7)]) as reader:
            assert [str(f.type) for f in reader.schema] == [
                "int64", "timestamp[us]", "timestamp[us, tz=UTC]", "decimal128(12, 2)", "int32"]
            table = reader.read_all()
    finally:
        monkeypatch.undo()
        time.tzset()
    assert table.column("id").to_pylist() == [8, 9]
    assert table.column("maybe").to_pylist() == [8, None]
    assert table.column("tz").to_pylist()[0] == dt.datetime(2026, 1, 1, 8, tzinfo=UTC)


def test_a_failing_select_is_an_adapter_error(spark_connection: SparkConnection, spark_schema: str) -> None:
    session = spark_connection.session()
    with pytest.raises(AdapterError) as caught, source.read_arrow(
        session, f"SELECT * FROM {spark_schema}.missing", []
    ):
        pass
    assert caught.value.failure_kind == "not-found"
    assert "missing" in str(caught.value)
