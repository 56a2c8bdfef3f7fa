"""Spark Connect faults on a server of the module's own: a token it checks, a restart, a client left behind.

One JVM (started with ``spark.connect.authenticate.token``) serves every test here; a test that stops it
leaves the next one to start its successor on the same port (``OwnServer.running``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocky_engine.adapters.spark.connection import SparkConnection
from rocky_engine.adapters.spark.errors import SparkAdapterError
from rocky_engine.adapters.spark.options import SparkConnectOptions
from rocky_engine.errors import AdapterError
from tests.fixtures.spark_server import SparkServer

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOKEN = "rocky-test-token-5c1e"
REPO = Path(__file__).resolve().parents[3]


class OwnServer:
    """The module's server; ``restart()`` replaces it by a new JVM on the same port."""

    def __init__(self, factory: Callable[..., SparkServer]) -> None:
        self._factory = factory
        self.server = factory(token=TOKEN)

    @property
    def url(self) -> str:
        return self.server.url

    def running(self) -> OwnServer:
        """The server, started again on the same port when a test stopped it."""
        if self.server.proc is None or self.server.proc.poll() is not None:
            self.server = self._factory(token=TOKEN, port=self.server.port)
        return self


@pytest.fixture(scope="module")
def own_server(spark_factory: Callable[..., SparkServer]) -> OwnServer:
    return OwnServer(spark_factory)


@pytest.fixture
def own(own_server: OwnServer) -> OwnServer:
    return own_server.running()


@pytest.fixture
def connect(own: OwnServer) -> Iterator[Callable[..., SparkConnection]]:
    opened: list[SparkConnection] = []

    def open_(**options: str) -> SparkConnection:
        connection = SparkConnection.open(SparkConnectOptions(remote=own.url, adapter="lake", **options))
        opened.append(connection)
        return connection

    yield open_
    for connection in opened:
        connection.close()


def test_the_right_token_is_accepted(connect: Callable[..., SparkConnection]) -> None:
    assert connect(token=TOKEN).main.query("SELECT 1") == [(1,)]


@pytest.mark.parametrize("token", ["wrong-token-value", None])
def test_a_wrong_or_missing_token_is_auth_failed_and_never_shown(
    own: OwnServer, token: str | None, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(AdapterError) as info:
        SparkConnection.open(SparkConnectOptions(remote=own.url, token=token, adapter="lake"))
    error = info.value
    assert error.failure_kind == "auth-failed"
    where = own.url.removeprefix("sc://")
    assert str(error) == (
        f"the Spark Connect server of adapter 'lake' at {where} refused the credentials (UNAUTHENTICATED); "
        "check the token of the adapter (it is not shown) and its access to the cluster"
    )
    out, err = capfd.readouterr()
    for text in (str(error), repr(error.__dict__), out, err):
        assert "wrong-token-value" not in text and TOKEN not in text


def test_a_restart_loses_the_session_and_the_next_statement_opens_a_new_one(
    own: OwnServer, connect: Callable[..., SparkConnection]
) -> None:
    connection = connect(token=TOKEN)
    session, quiet = connection.session(), connection.session()
    session.execute("CREATE TEMPORARY VIEW before_restart AS SELECT 1 AS x")
    quiet.query("SELECT 1")
    server = own.server
    # SIGTERM: the JVM ran its shutdown hooks (measured under 1 s; -9 means the fixture had to kill it)
    assert server.stop() == 143, server.log_tail()
    with pytest.raises(SparkAdapterError) as info:
        session.query("SELECT 1")
    assert info.value.failure_kind == "connection-failed"
    assert info.value.message.startswith(
        f"cannot reach the Spark Connect server of adapter 'lake' at {server.url[5:]}"
    )
    own.running()
    assert session.query("SELECT 1") == [(1,)]
    assert session.opens == 2  # a new session: the server forgot the old one with its temp view
    with pytest.raises(SparkAdapterError) as gone:
        session.query("SELECT x FROM before_restart")
    assert gone.value.error_class == "TABLE_OR_VIEW_NOT_FOUND"
    # a session that sent nothing while the server was down learns only now that its session is gone
    with pytest.raises(SparkAdapterError) as changed:
        quiet.query("SELECT 1")
    # (pyspark closes its client on the server's SESSION_CHANGED answer, then says NO_ACTIVE_SESSION)
    assert changed.value.failure_kind == "connection-failed"
    assert changed.value.error_class == "NO_ACTIVE_SESSION"
    assert quiet.query("SELECT 1") == [(1,)] and quiet.opens == 2


_CHILD = textwrap.dedent(
    """
    import sys
    from rocky_engine.adapters.spark.connection import SparkConnection
    from rocky_engine.adapters.spark.options import SparkConnectOptions

    connection = SparkConnection.open(SparkConnectOptions(remote=sys.argv[1], token=sys.argv[2]))
    session = connection.session()
    session.query("SELECT 1")
    print("ready", flush=True)
    sys.stdin.readline()  # the parent stops the server meanwhile
    try:
        session.query("SELECT 1")
    except Exception as exc:
        print(type(exc).__name__, getattr(exc, "failure_kind", ""), flush=True)
    # no close(): a client that forgets must not hang the interpreter at exit either
    """
)


def test_a_client_whose_server_vanished_exits_promptly_and_quietly(own: OwnServer) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, own.url, TOKEN],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        own.server.stop()
        child.stdin.write("\n")
        child.stdin.flush()
        started = time.monotonic()
        out, err = child.communicate(timeout=60)  # pyspark's default retry policy hangs here for minutes
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert time.monotonic() - started < 30
    assert out.strip() == "SparkAdapterError connection-failed"
    # no pyspark JSON error records, no RETRIES_EXCEEDED warnings, no grpc chatter
    assert err == ""
