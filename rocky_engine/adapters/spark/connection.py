"""A Spark Connect endpoint: the checked first session, one more session per worker, and closing them all.

``SparkConnection.open(options)`` parses the options, opens the main session (with the configured
``session_id``, if any) and runs ``SELECT 1``, so a wrong host or token fails at open with its failure
kind. ``session()`` gives each worker a session of its own on the server. ``close()`` closes every
session it handed out, interrupting statements still in flight.

pyspark is imported on first use only: ``rocky --help``, ``rocky validate`` and a quiet ``rocky tick``
never pay for pyspark, grpc, pandas or pyarrow.

Two pyspark defaults are overridden here because they are wrong for an engine:

- the client retries UNAVAILABLE 15 times over 10+ minutes; rocky has its own retry policy and circuit
  breaker, so the client gives up after ~0.5 s (and so does ``stop()`` against a dead server, which
  otherwise also hangs the interpreter at exit: measured, more than 60 s);
- it prints a JSON record of every failed statement on stderr, and grpc prints TLS handshake noise;
  rocky reports errors itself, once.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import TYPE_CHECKING

from rocky_engine.adapters.spark.options import Endpoint, SparkConnectOptions, channel_params, parse
from rocky_engine.adapters.spark.session import SparkConnectSession

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession

    from rocky_engine.adapters.spark.capabilities import SparkCapabilities

#: client-side retries of one RPC (50, 100, 200 ms): a blip, not an outage
CLIENT_RETRIES = 3
_quiet_once = threading.Lock()
_quieted = False


class SparkConnection:
    """The main session plus the worker sessions of one Spark Connect endpoint."""

    def __init__(self, options: SparkConnectOptions) -> None:
        self.endpoint: Endpoint = parse(options)
        self._lock = threading.Lock()
        self._sessions: list[SparkConnectSession] = []
        self.main = self._new_session(fresh=False)

    @classmethod
    def open(cls, options: SparkConnectOptions) -> SparkConnection:
        """Connect and prove it with ``SELECT 1``.

        Raises:
            AdapterError: malformed options (query-rejected), server unreachable (connection-failed),
                token refused (auth-failed).
        """
        connection = cls(options)
        try:
            connection.main.query("SELECT 1")
        except BaseException:
            connection.close()
            raise
        return connection

    @property
    def where(self) -> str:
        return self.endpoint.where

    def session(self) -> SparkConnectSession:
        """A new session for one worker thread (its own server-side session, opened on first use)."""
        return self._new_session(fresh=True)

    def capabilities(self) -> SparkCapabilities:
        """What the server can do (table format, MERGE, stale-read risk): see ``capabilities.probe``."""
        from rocky_engine.adapters.spark.capabilities import probe

        return probe(self.main)

    def close(self) -> None:
        """Close every session this connection opened (in-flight statements are interrupted first)."""
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()

    def _new_session(self, *, fresh: bool) -> SparkConnectSession:
        session = SparkConnectSession(self.endpoint, open_spark, fresh=fresh)
        with self._lock:
            self._sessions.append(session)
        return session


def open_spark(endpoint: Endpoint, fresh: bool) -> SparkSession:
    """A new pyspark Connect session to ``endpoint`` (no RPC yet: the first statement connects).

    ``fresh`` drops a configured ``session_id``, so worker sessions never share the main one.
    """
    quiet_pyspark()
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession

    builder = DefaultChannelBuilder(endpoint.url)
    for key, value in channel_params(endpoint, fresh_session=fresh).items():
        builder.set(key, value)
    spark = SparkSession.builder.channelBuilder(builder).create()
    if not fresh and endpoint.session_id is not None:
        # A configured session id names a server-side session someone else may use too: closing rocky's
        # client must not release it under them.
        spark.release_session_on_close = False
    spark.client.set_retry_policies(
        [DefaultPolicy(max_retries=CLIENT_RETRIES, initial_backoff=50, backoff_multiplier=2, max_backoff=500)]
    )
    return spark


def quiet_pyspark() -> None:
    """Silence pyspark's and grpc's own error printing (once per process, before grpc loads)."""
    global _quieted
    with _quiet_once:
        if _quieted:
            return
        # grpc reads this when its C core loads; a process that loaded grpc earlier keeps its setting.
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
        from pyspark.logger import PySparkLogger

        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).disabled = True
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
        _quieted = True
