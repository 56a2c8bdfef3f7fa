"""Statement retries with exponential backoff, sharing one circuit breaker per adapter per run.

``[adapter.NAME.retry]`` (CONTRACT section 1): only ``transient`` and ``connection-failed`` errors are
retried, up to ``max_retries`` times, after ``initial_backoff_ms * backoff_multiplier**n`` capped at
``max_backoff_ms`` (full jitter: a uniform draw below that when ``jitter``). Every attempt is reported to
the adapter's ``CircuitBreaker`` (``adapters.breaker``), which makes every statement fail fast once the
warehouse stopped answering.

Transactions: statements inside ``transaction()`` are not retried one by one (re-running the middle of a
transaction whose connection died would run it outside the transaction). ``atomically(session, fn)``
retries a whole transaction instead; use it only for idempotent units (drop + create, delete + insert).

The copy seam (``read_arrow``, ``read_arrow_ranges``, ``scan_arrow``) is not retried: a stream half consumed
cannot be replayed.
A failed table copy is retried whole by the run's ``table_retries``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from rocky_engine.adapters.base import (
    CatalogTable,
    Column,
    Maintenance,
    Relation,
    TableColumns,
    WarehouseAdapter,
    WarehouseSession,
)
from rocky_engine.adapters.breaker import CircuitBreaker
from rocky_engine.adapters.failure import RETRYABLE_KINDS
from rocky_engine.config.adapters import RetryConfig
from rocky_engine.errors import AdapterError
from rocky_engine.logs import get_logger

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.adapters.sql_types import SqlType

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetriedAttempt:
    """A failed attempt that was retried: what the run reports of it (``materializations[].attempts``)."""

    #: ``time.perf_counter()`` at the attempt's start, to order the attempts of one model
    started: float
    duration_ms: int
    error: str
    failure_kind: str
    #: the wait before the next attempt
    backoff_ms: int


class StatementRetrier:
    """Calls a warehouse operation, retrying transient and connection failures with backoff."""

    def __init__(
        self,
        cfg: RetryConfig,
        breaker: CircuitBreaker,
        *,
        sleep: Callable[[float], object] | None = None,
        rand: Callable[[], float] = random.random,
        log: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.breaker = breaker
        self._sleep = sleep
        self._rand = rand
        self._log = log or get_logger("retry")
        #: the retried attempts since the last ``take_retried`` (one retrier per session: one statement at
        #: a time, so no lock)
        self.retried: list[RetriedAttempt] = []

    def take_retried(self) -> list[RetriedAttempt]:
        """The attempts retried since the last call (a run asks once per model), and forget them."""
        taken, self.retried = self.retried, []
        return taken

    def backoff_ms(self, retry: int) -> float:
        """The backoff ceiling before retry number ``retry`` (0-based), without jitter."""
        cfg = self.cfg
        return float(min(cfg.initial_backoff_ms * cfg.backoff_multiplier**retry, cfg.max_backoff_ms))

    def delay_seconds(self, retry: int) -> float:
        """The wait before retry ``retry``: the backoff, or a uniform draw in [0, backoff) with jitter."""
        ceiling = self.backoff_ms(retry)
        return (ceiling * self._rand() if self.cfg.jitter else ceiling) / 1000.0

    def observe(self, exc: AdapterError) -> None:
        """Feed an error that was not retried here (e.g. inside a transaction) to the breaker."""
        if exc.failure_kind in RETRYABLE_KINDS:
            self.breaker.record_failure()
        else:
            self.breaker.record_success()

    def call(
        self,
        fn: Callable[[], T],
        description: str = "statement",
        *,
        on_retry: Callable[[AdapterError], None] | None = None,
        stop: threading.Event | None = None,
    ) -> T:
        """Run ``fn`` until it succeeds, fails permanently, runs out of retries or the breaker opens.

        ``on_retry`` runs before each retry (e.g. to drop a dead connection); ``stop`` ends retrying
        early (an interrupted run) and makes the default sleep wake up at once.

        Raises:
            AdapterError: the last failure, or the breaker's fail-fast error.
        """
        retry = 0
        while True:
            self.breaker.before_call()
            t0 = time.perf_counter()
            try:
                result = fn()
            except AdapterError as exc:
                if exc.failure_kind not in RETRYABLE_KINDS:
                    self.breaker.record_success()  # the warehouse answered: nothing to retry
                    raise
                opened = self.breaker.record_failure()
                if opened or retry >= self.cfg.max_retries or (stop is not None and stop.is_set()):
                    raise
                delay = self.delay_seconds(retry)
                self._log.warning(
                    "adapter '%s': %s failed (%s): %s; retry %d/%d in %.2f s",
                    self.breaker.adapter, description, exc.failure_kind, exc.message,
                    retry + 1, self.cfg.max_retries, delay,
                )
                spent_ms = int((time.perf_counter() - t0) * 1000)
                self.retried.append(
                    RetriedAttempt(t0, spent_ms, exc.message, exc.failure_kind, int(delay * 1000))
                )
                if on_retry is not None:
                    on_retry(exc)
                self._wait(delay, stop)
                if stop is not None and stop.is_set():
                    raise
                retry += 1
                continue
            except BaseException:
                self.breaker.abandon()
                raise
            self.breaker.record_success()
            return result

    def _wait(self, seconds: float, stop: threading.Event | None) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif stop is not None:
            stop.wait(seconds)
        elif seconds > 0:
            time.sleep(seconds)


class RetryingSession:
    """A session whose statements go through the retrier; reconnects the inner session on connection loss."""

    def __init__(self, inner: WarehouseSession, retrier: StatementRetrier) -> None:
        self.inner = inner
        self.retrier = retrier
        self._stop = threading.Event()
        self._depth = 0  # > 0 while a transaction is open: statements then run once, unretried

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        if self._depth:
            return self.inner.execute(sql, params)
        return self._call(lambda: self.inner.execute(sql, params), _describe(sql))

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        if self._depth:
            return self.inner.query(sql, params)
        return self._call(lambda: self.inner.query(sql, params), _describe(sql))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction whose statements are not retried (a failure is still fed to the breaker)."""
        if self._depth:
            with self.inner.transaction():
                yield
            return
        self.retrier.breaker.before_call()
        self._depth += 1
        try:
            with self.inner.transaction():
                yield
        except AdapterError as exc:
            self.retrier.observe(exc)
            self._recover(exc)
            raise
        except BaseException:
            self.retrier.breaker.abandon()
            raise
        else:
            self.retrier.breaker.record_success()
        finally:
            self._depth -= 1

    def atomic(self, fn: Callable[[], T], description: str = "transaction") -> T:
        """Run ``fn`` in a transaction, retrying the whole transaction (``fn`` must be idempotent)."""
        if self._depth:
            return fn()

        def once() -> T:
            self._depth += 1
            try:
                with self.inner.transaction():
                    return fn()
            finally:
                self._depth -= 1

        return self._call(once, description)

    def read_arrow(
        self, sql: str, params: Sequence[Any], columns: Sequence[tuple[str, SqlType]]
    ) -> AbstractContextManager[Any]:
        return self.inner.read_arrow(sql, params, columns)

    def read_arrow_ranges(
        self, statements: Sequence[tuple[str, Sequence[Any]]], columns: Sequence[tuple[str, SqlType]]
    ) -> AbstractContextManager[list[Any]]:
        return self.inner.read_arrow_ranges(statements, columns)

    def scan_arrow(
        self, name: str, columns: Sequence[tuple[str, str]], readers: Sequence[Any], *, once: bool
    ) -> AbstractContextManager[str]:
        return self.inner.scan_arrow(name, columns, readers, once=once)

    def take_retried(self) -> list[RetriedAttempt]:
        """The statement attempts of this session retried since the last call (``StatementRetrier``)."""
        return self.retrier.take_retried()

    def interrupt(self) -> None:
        self._stop.set()
        self.inner.interrupt()

    def close(self) -> None:
        self.inner.close()

    def _call(self, fn: Callable[[], T], description: str) -> T:
        return self.retrier.call(fn, description, on_retry=self._recover, stop=self._stop)

    def _recover(self, exc: AdapterError) -> None:
        if exc.failure_kind != "connection-failed":
            return
        reset = getattr(self.inner, "reset", None)
        if callable(reset):
            reset()


class RetryingAdapter(RetryingSession):
    """A warehouse adapter whose sessions share one circuit breaker for the run."""

    def __init__(
        self,
        inner: WarehouseAdapter,
        cfg: RetryConfig,
        *,
        breaker: CircuitBreaker | None = None,
        sleep: Callable[[float], object] | None = None,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.adapter = inner
        self.cfg = cfg
        self.breaker = breaker or CircuitBreaker.for_adapter(inner.name, cfg, clock)
        self._sleep = sleep
        self._rand = rand
        super().__init__(inner, self._retrier())
        self.name = inner.name
        self.type = inner.type
        self.catalog = inner.catalog
        self.default_schema = inner.default_schema
        self.dialect: Dialect = inner.dialect

    def _retrier(self) -> StatementRetrier:
        return StatementRetrier(self.cfg, self.breaker, sleep=self._sleep, rand=self._rand)

    def session(self) -> RetryingSession:
        return RetryingSession(self.adapter.session(), self._retrier())

    def describe(self, schema: str, table: str, catalog: str | None = None) -> list[Column]:
        return self._call(lambda: self.adapter.describe(schema, table, catalog), f"describe {schema}.{table}")

    def table_exists(self, schema: str, table: str, catalog: str | None = None) -> bool:
        return self._call(lambda: self.adapter.table_exists(schema, table, catalog), "table lookup")

    def list_schemas(self, catalog: str | None = None) -> list[str]:
        return self._call(lambda: self.adapter.list_schemas(catalog), "schema listing")

    def list_tables(self, schema: str, catalog: str | None = None) -> list[str]:
        return self._call(lambda: self.adapter.list_tables(schema, catalog), "table listing")

    def list_relations(self, catalog: str | None = None) -> list[Relation]:
        return self._call(lambda: self.adapter.list_relations(catalog), "catalog listing")

    def catalog_tables(self, catalog: str) -> list[CatalogTable]:
        return self._call(lambda: self.adapter.catalog_tables(catalog), "catalog read")

    def read_columns(self, catalog: str, schemas: Sequence[str]) -> TableColumns:
        return self._call(lambda: self.adapter.read_columns(catalog, schemas), "column read")

    def maintenance(self) -> Maintenance | None:
        return self.adapter.maintenance()

    def ensure_schema(self, schema: str, catalog: str | None = None) -> bool:
        return self._call(lambda: self.adapter.ensure_schema(schema, catalog), f"create schema {schema}")

    def quote(self, identifier: str) -> str:
        return self.adapter.quote(identifier)

    def qualified(self, schema: str, table: str, catalog: str | None = None) -> str:
        return self.adapter.qualified(schema, table, catalog)


def atomically(session: WarehouseSession, fn: Callable[[], T], description: str = "transaction") -> T:
    """Run ``fn`` in one transaction of ``session``, retried as a whole when the session supports it."""
    if isinstance(session, RetryingSession):
        return session.atomic(fn, description)
    with session.transaction():
        return fn()


def _describe(sql: str) -> str:
    text = " ".join(sql.split())
    return f"statement '{text[:80]}...'" if len(text) > 80 else f"statement '{text}'"
