"""The Spark connection layer against a real local Spark Connect server: statements, sessions, failures."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from rocky_engine.adapters.spark.connection import SparkConnection
from rocky_engine.adapters.spark.errors import SparkAdapterError
from rocky_engine.adapters.spark.options import SparkConnectOptions
from rocky_engine.errors import AdapterError
from tests.fixtures.processes import wait_for
from tests.fixtures.spark_server import SparkServer

pytestmark = pytest.mark.spark

#: a statement that runs until it is interrupted (one task, one core)
#: long enough to be interrupted, yet bounded (see ENDLESS_QUERY in test_spark_interrupt.py for why)
ENDLESS = "SELECT count(*) FROM range(0, 20000000, 1, 1) WHERE sha2(CAST(id AS STRING), 256) = 'x'"


def test_query_returns_tuples_of_python_values(spark_connection: SparkConnection) -> None:
    rows = spark_connection.main.query(
        "SELECT 1 AS i, 'x' AS s, CAST(1.50 AS DECIMAL(5, 2)) AS d, TIMESTAMP'2024-01-02 03:04:05' AS ts, "
        "DATE'2024-01-02' AS day, true AS b, NULL AS n, 2.5D AS f"
    )
    assert rows == [
        (
            1,
            "x",
            Decimal("1.50"),
            dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            dt.date(2024, 1, 2),
            True,
            None,
            2.5,
        )
    ]
    assert rows[0][3].utcoffset() == dt.timedelta(0)  # UTC-aware, whatever the client's time zone


def test_positional_parameters_bind_values_not_text(spark_connection: SparkConnection) -> None:
    rows = spark_connection.main.query("SELECT ? AS a, ? AS b, 'what?' AS c", [41, "it's ? here"])
    assert rows == [(41, "it's ? here", "what?")]


def test_commands_run_eagerly_and_query_arrow_keeps_the_schema(
    spark_connection: SparkConnection, spark_schema: str
) -> None:
    main = spark_connection.main
    assert (
        main.execute(f"CREATE TABLE {spark_schema}.t USING parquet AS SELECT id, id * 2 AS v FROM range(5)")
        is None
    )
    main.execute(f"INSERT INTO {spark_schema}.t SELECT ?, ?", [10, 20])
    table = main.query_arrow(f"SELECT id, v FROM {spark_schema}.t ORDER BY id")
    assert isinstance(table, pa.Table)
    assert table.schema.names == ["id", "v"] and table.schema.field("id").type == pa.int64()
    assert table.column("v").to_pylist() == [0, 2, 4, 6, 8, 20]
    assert main.query(f"SELECT count(*) FROM {spark_schema}.t WHERE id > ?", [3]) == [(2,)]


def test_statement_errors_are_one_line_adapter_errors_with_their_kind(
    spark_connection: SparkConnection,
) -> None:
    with pytest.raises(SparkAdapterError) as info:
        spark_connection.main.query("SELECT * FROM no_such_schema.no_such_table")
    error = info.value
    assert (error.failure_kind, error.error_class, error.sqlstate) == (
        "not-found",
        "TABLE_OR_VIEW_NOT_FOUND",
        "42P01",
    )
    assert "\n" not in str(error) and "JVM stacktrace" not in str(error)
    assert str(error).startswith(
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `no_such_schema`.`no_such_table`"
    )


def test_a_failed_statement_prints_nothing_of_its_own(
    spark_connection: SparkConnection, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SparkAdapterError):
        spark_connection.main.query("SELECT * FROM no_such_table_here")
    out, err = capfd.readouterr()
    # pyspark would log a JSON record with the whole JVM stack trace on stderr; rocky reports errors once
    assert "no_such_table_here" not in out + err


def test_errors_that_are_not_the_drivers_pass_through_unchanged(spark_connection: SparkConnection) -> None:
    with pytest.raises(ZeroDivisionError):
        spark_connection.main.run(lambda _spark: 1 // 0)


def test_each_worker_has_its_own_server_side_session(spark_connection: SparkConnection) -> None:
    first, second = spark_connection.session(), spark_connection.session()
    first.execute("CREATE TEMPORARY VIEW mine AS SELECT 7 AS x")
    assert first.query("SELECT x FROM mine") == [(7,)]
    with pytest.raises(SparkAdapterError) as info:
        second.query("SELECT x FROM mine")
    assert info.value.error_class == "TABLE_OR_VIEW_NOT_FOUND"
    assert len({first.spark.session_id, second.spark.session_id, spark_connection.main.spark.session_id}) == 3


def test_the_configured_session_id_is_the_main_sessions_only(spark_server: SparkServer) -> None:
    sid = str(uuid.uuid4())
    connection = SparkConnection.open(SparkConnectOptions(remote=spark_server.url, session_id=sid))
    try:
        assert connection.main.spark.session_id == sid
        assert connection.session().spark.session_id != sid
    finally:
        connection.close()


def test_sessions_run_statements_at_the_same_time(spark_connection: SparkConnection) -> None:
    slow, quick = spark_connection.session(), spark_connection.session()
    errors: list[SparkAdapterError] = []

    def run_slow() -> None:
        try:
            slow.query(ENDLESS)
        except SparkAdapterError as exc:
            errors.append(exc)

    worker = threading.Thread(target=run_slow)
    worker.start()
    try:
        wait_for(lambda: slow.busy, timeout=30, what="the slow statement to start")
        assert quick.query("SELECT 1") == [(1,)]
        assert slow.busy and worker.is_alive()  # the quick session did not wait for the slow one
    finally:
        assert slow.interrupt() == 1
        worker.join(60)
    assert not worker.is_alive()
    assert [e.error_class for e in errors] == ["OPERATION_CANCELED"]


def test_close_closes_every_session_and_later_statements_say_so(spark_connection: SparkConnection) -> None:
    worker = spark_connection.session()
    worker.query("SELECT 1")
    pyspark_session = worker.spark
    spark_connection.close()
    assert pyspark_session.is_stopped and worker.closed and spark_connection.main.closed
    with pytest.raises(SparkAdapterError, match="the Spark Connect session of adapter 'lake' is closed"):
        worker.query("SELECT 1")
    spark_connection.close()  # idempotent


def test_an_unreachable_server_fails_at_open_fast_with_the_address(spark_server: SparkServer) -> None:
    from tests.fixtures.postgres import free_port

    port = free_port()
    started = time.monotonic()
    with pytest.raises(AdapterError) as info:
        SparkConnection.open(SparkConnectOptions(remote=f"sc://127.0.0.1:{port}", adapter="lake"))
    # pyspark alone would keep retrying for over ten minutes; rocky's own retry policy decides instead
    assert time.monotonic() - started < 20
    assert info.value.failure_kind == "connection-failed"
    assert str(info.value).startswith(
        f"cannot reach the Spark Connect server of adapter 'lake' at 127.0.0.1:{port}: "
    )
    assert "Connection refused" in str(info.value) and "\n" not in str(info.value)
    assert info.value.hint == "check remote (sc://host:port) and that the server is running"


def test_a_stale_file_listing_is_transient_and_a_new_session_reads_the_new_files(
    spark_connection: SparkConnection, spark_schema: str
) -> None:
    reader, writer = spark_connection.session(), spark_connection.session()
    table = f"{spark_schema}.shared"
    writer.execute(f"CREATE TABLE {table} USING parquet AS SELECT id FROM range(10)")
    assert reader.query(f"SELECT count(*) FROM {table}") == [(10,)]
    writer.execute(f"INSERT INTO {table} SELECT id FROM range(5)")
    # Spark caches the reader's file listing: another session's append goes unseen (no error at all)
    assert reader.query(f"SELECT count(*) FROM {table}") == [(10,)]
    writer.execute(f"INSERT OVERWRITE TABLE {table} SELECT id FROM range(3)")
    with pytest.raises(SparkAdapterError) as info:
        reader.query(f"SELECT count(*) FROM {table}")
    assert (info.value.failure_kind, info.value.error_class) == (
        "transient",
        "FAILED_READ_FILE.FILE_NOT_EXIST",
    )
    # the session that raised it was replaced, so the retry the kind asks for lists the files afresh
    assert reader.query(f"SELECT count(*) FROM {table}") == [(3,)]
    assert reader.opens == 2
