"""One worker's Spark Connect session: statements, rows and Arrow out, interrupt from another thread, close.

A pyspark Connect ``SparkSession`` is a client of one server-side session. Each worker thread gets its
own (``SparkConnection.session()``): statements of one server-side session share its temp views and
confs, and ``interruptAll`` would hit all of them. Every statement this wrapper runs carries an operation
tag of its own, so ``interrupt()`` cancels exactly this wrapper's statement on the server.

Measured against the local server (pyspark 4.3.0): a statement keeps running on the server when the
client process dies or closes its channel; only an Interrupt RPC stops it. So ``close()`` interrupts an
in-flight statement before it stops the session, and a runner that is being stopped must call
``interrupt()`` (or ``close()``) on every busy session before it exits.

The server cancels by interrupting its execution thread; an interrupt that lands while Hadoop's committer
sets a write job up is swallowed there and the write runs to its end (docs/adapters.md, "Interruption on
Spark"). Nothing more can be asked through Spark Connect: a second interrupt of the same operation is a
no-op on the server, so the statement's own answer is what the caller waits for.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rocky_engine.adapters.spark.errors import SparkAdapterError, to_adapter_error

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.connect.session import SparkSession

    from rocky_engine.adapters.spark.options import Endpoint

T = TypeVar("T")
#: how long ``interrupt()`` keeps asking when the statement has not reached the server yet
INTERRUPT_GRACE_S = 5.0
#: how long ``close()`` lets an interrupted statement take its answer before it closes the channel
CLOSE_WAIT_S = 10.0
_DRIVER_MODULES = ("pyspark", "grpc", "google")


class SparkConnectSession:
    """A lazily opened pyspark session for one worker; statements raise ``SparkAdapterError`` only."""

    def __init__(
        self, endpoint: Endpoint, opener: Callable[[Endpoint, bool], SparkSession], *, fresh: bool
    ) -> None:
        self._endpoint = endpoint
        self._opener = opener
        self._fresh = fresh
        self._spark: SparkSession | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._closed = False
        self._tag = f"rocky-{uuid.uuid4().hex}"
        #: pyspark sessions opened so far (a new one after each lost session)
        self.opens = 0

    # --- statements ----------------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run one command (DDL, INSERT, CTAS...); Spark runs commands eagerly and reports no row count.

        A query (SELECT) given here is only analysed, not run: use ``query``.
        """
        self.run(lambda spark: spark.sql(sql, args=_args(params)))

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a query and fetch every row as a tuple (through Arrow: ~10x faster than ``collect()``)."""
        table = self.query_arrow(sql, params)
        return list(zip(*(column.to_pylist() for column in table.columns), strict=True))

    def query_arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Run a query and fetch the result as one Arrow table (timestamps come as UTC-aware)."""
        return self.run(lambda spark: spark.sql(sql, args=_args(params)).toArrow())

    def run(self, work: Callable[[SparkSession], T]) -> T:
        """Run ``work`` on the pyspark session with this wrapper's error handling and interrupt tag.

        The seam for what SQL text cannot say (``createDataFrame`` of an Arrow table, catalog calls).
        """
        spark = self._session()
        with self._lock:
            self._busy += 1
        spark.addTag(self._tag)  # thread-local in the client: only operations this thread starts
        try:
            return work(spark)
        except Exception as exc:
            if self._closed:
                # close() from another thread stopped the client under this call (grpc then raises a
                # plain ValueError): the statement is over, whatever the exception says.
                error = self._closed_error("was closed while the statement ran")
            elif type(exc).__module__.startswith(_DRIVER_MODULES):
                error = to_adapter_error(
                    exc, adapter=self._endpoint.adapter, where=self._endpoint.where, mask=self._endpoint.mask
                )
            else:
                raise
        finally:
            spark.removeTag(self._tag)
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()
        if error.needs_new_session:
            self.reset()
        raise error

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def endpoint(self) -> Endpoint:
        """The server this session talks to (for classifying errors raised outside ``run``)."""
        return self._endpoint

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._busy > 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def spark(self) -> SparkSession:
        """The pyspark session (opened now if needed); prefer ``run`` so errors are classified."""
        return self._session()

    def interrupt(self) -> int:
        """Cancel this session's in-flight statement on the server; returns how many were cancelled.

        Safe from any thread. A statement whose request has not reached the server yet cannot be
        cancelled, so this asks again (every 50 ms, up to ``INTERRUPT_GRACE_S``) while one is in flight.
        """
        with self._lock:
            spark = self._spark
        if spark is None:
            return 0
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while self.busy:
            try:
                cancelled = spark.interruptTag(self._tag)
            except Exception as exc:
                if not type(exc).__module__.startswith(_DRIVER_MODULES):
                    raise
                return 0  # the server is gone: nothing of ours runs there any more
            if cancelled:
                return len(cancelled)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        return 0

    def reset(self) -> None:
        """Stop the pyspark session; the next statement opens a new one (after a lost session)."""
        with self._lock:
            spark, self._spark = self._spark, None
        if spark is not None:
            _stop(spark)

    def close(self) -> None:
        """Interrupt what still runs, then stop the session (releases it on the server). Idempotent.

        Never raises and never waits long: the session's client gives up on an unreachable server
        after its short retry budget.
        """
        if self.busy and self.interrupt():
            with self._idle:
                self._idle.wait_for(lambda: self._busy == 0, timeout=CLOSE_WAIT_S)
        self._closed = True
        self.reset()

    def _session(self) -> SparkSession:
        with self._lock:
            if self._closed:
                raise self._closed_error("is closed")
            spark = self._spark
        if spark is None or spark.is_stopped:
            spark = self._opener(self._endpoint, self._fresh)
            with self._lock:
                self._spark = spark
                self.opens += 1
        return spark


    def _closed_error(self, what: str) -> SparkAdapterError:
        return SparkAdapterError(
            f"the Spark Connect session of adapter '{self._endpoint.adapter}' {what}", failure_kind="unknown"
        )


def _args(params: Sequence[Any] | None) -> list[Any] | None:
    return list(params) if params is not None else None


def _stop(spark: SparkSession) -> None:
    try:
        spark.stop()  # best effort in pyspark itself: it logs and swallows release failures
    except Exception:
        pass
