"""Interrupting a Spark statement from another thread cancels it on the server, not only in the client.

Measured here: a statement keeps running on the server when its client goes away; only an Interrupt RPC
stops it, and the server then answers the waiting call with OPERATION_CANCELED. That answer is what these
tests wait for: a channel closed by the client alone would end the call with gRPC CANCELLED instead.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest

from rocky_engine.adapters.spark.connection import SparkConnection
from rocky_engine.adapters.spark.errors import SparkAdapterError
from rocky_engine.adapters.spark.options import SparkConnectOptions
from rocky_engine.adapters.spark.session import SparkConnectSession
from tests.fixtures.processes import wait_for
from tests.fixtures.spark_server import SparkServer

pytestmark = pytest.mark.spark

#: long enough to be interrupted (tens of seconds on one core), yet bounded: a cancel the server loses
#: (docs/adapters.md, "Interruption on Spark") must not leave a task burning a core of the worker's shared
#: server for the rest of the session, which slowed every later Spark test and broke the SIGTERM tests'
#: idle check while the query was endless
ENDLESS_QUERY = (
    "SELECT count(*) AS n FROM range(0, 20000000, 1, 1) WHERE sha2(CAST(id AS STRING), 256) = 'x'"
)


def _in_background(
    session: SparkConnectSession, call: Callable[[], object]
) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_for(lambda: session.busy, timeout=30, what="the statement to start")
    return thread, errors


def _cancelled(
    thread: threading.Thread, errors: list[BaseException], session: SparkConnectSession
) -> SparkAdapterError:
    thread.join(60)
    if thread.is_alive():  # never leave an endless statement burning a core of the shared server
        session.spark.interruptAll()
        thread.join(30)
        pytest.fail("the statement was still running 60 s after the interrupt")
    assert len(errors) == 1 and isinstance(errors[0], SparkAdapterError), errors
    return errors[0]


def test_interrupt_cancels_a_ctas_and_leaves_no_table(
    spark_connection: SparkConnection, spark_schema: str
) -> None:
    worker = spark_connection.session()
    target = f"{spark_schema}.big"
    thread, errors = _in_background(
        worker, lambda: worker.execute(f"CREATE TABLE {target} USING parquet AS {ENDLESS_QUERY}")
    )
    assert worker.interrupt() == 1
    error = _cancelled(thread, errors, worker)
    assert (error.error_class, error.sqlstate, error.failure_kind) == (
        "OPERATION_CANCELED",
        "HY008",
        "unknown",
    )
    assert str(error) == "[OPERATION_CANCELED] Operation has been canceled. SQLSTATE: HY008"
    assert spark_connection.main.query(f"SHOW TABLES IN {spark_schema}") == []
    # the session stays usable, on the same server-side session
    assert worker.query("SELECT 1") == [(1,)] and worker.opens == 1


def test_close_interrupts_what_still_runs_before_it_stops(spark_connection: SparkConnection) -> None:
    worker = spark_connection.session()
    thread, errors = _in_background(worker, lambda: worker.query(ENDLESS_QUERY))
    worker.close()
    error = _cancelled(thread, errors, worker)
    assert error.error_class == "OPERATION_CANCELED"
    assert worker.closed


def _interrupt_only_the_first(first: SparkConnectSession, second: SparkConnectSession) -> None:
    """Both run an endless query; interrupting ``first`` must leave ``second``'s running."""
    one, one_errors = _in_background(first, lambda: first.query(ENDLESS_QUERY))
    two, two_errors = _in_background(second, lambda: second.query(ENDLESS_QUERY))
    try:
        assert first.interrupt() == 1
        assert _cancelled(one, one_errors, first).error_class == "OPERATION_CANCELED"
        assert second.busy and two.is_alive()
    finally:
        second.interrupt()
    assert _cancelled(two, two_errors, second).error_class == "OPERATION_CANCELED"


def test_interrupt_cancels_only_its_own_sessions_statement(spark_connection: SparkConnection) -> None:
    _interrupt_only_the_first(spark_connection.session(), spark_connection.session())


def test_interrupt_with_nothing_in_flight_is_a_no_op(spark_connection: SparkConnection) -> None:
    worker = spark_connection.session()
    assert worker.interrupt() == 0  # never opened
    worker.query("SELECT 1")
    assert worker.interrupt() == 0
    assert worker.query("SELECT 2") == [(2,)]


def test_interrupt_spares_other_clients_of_a_shared_server_session(spark_server: SparkServer) -> None:
    # A configured session_id can be shared with another client (a notebook on the same session, say):
    # interrupting rocky's statement must not cancel theirs.
    sid = str(uuid.uuid4())
    ours = SparkConnection.open(SparkConnectOptions(remote=spark_server.url, session_id=sid))
    theirs = SparkConnection.open(SparkConnectOptions(remote=spark_server.url, session_id=sid))
    try:
        mine, other = ours.main, theirs.main
        assert mine.spark.session_id == other.spark.session_id == sid
        _interrupt_only_the_first(mine, other)
        other.execute("CREATE TEMPORARY VIEW theirs AS SELECT 5 AS x")
        ours.close()
        # rocky did not open that server-side session, so closing does not release it under them
        assert other.query("SELECT x FROM theirs") == [(5,)]
    finally:
        ours.close()
        theirs.close()
