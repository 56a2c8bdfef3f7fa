"""Statement retries and the circuit breaker: deterministic units, then real faults on a real PostgreSQL."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import pytest

from rocky_engine.adapters.breaker import CircuitBreaker
from rocky_engine.adapters.postgres.adapter import PostgresAdapter, PostgresSession
from rocky_engine.adapters.retry import RetryingAdapter, RetryingSession, StatementRetrier
from rocky_engine.config.adapters import PostgresAdapterConfig, RetryConfig
from rocky_engine.errors import AdapterError
from tests.fixtures.postgres import PgDatabase, PgServer

OPEN_MSG = (
    "circuit breaker open after {n} consecutive failures on adapter '{a}'; remaining statements fail fast"
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sleeps:
    """Records requested sleeps; runs an optional action on the first one (e.g. restart the server)."""

    def __init__(self, on_first: Callable[[], None] | None = None) -> None:
        self.calls: list[float] = []
        self._on_first = on_first

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if len(self.calls) == 1 and self._on_first is not None:
            self._on_first()


class Flaky:
    """Fails with the given kinds in order, then returns "ok"; counts attempts."""

    def __init__(self, *kinds: str) -> None:
        self.kinds = list(kinds)
        self.attempts = 0

    def __call__(self) -> str:
        self.attempts += 1
        if self.kinds:
            raise AdapterError(f"boom {self.attempts}", failure_kind=self.kinds.pop(0))
        return "ok"


def _retrier(
    sleeps: Sleeps | None = None,
    *,
    rand: Callable[[], float] = lambda: 0.5,
    breaker: CircuitBreaker | None = None,
    **cfg: object,
) -> StatementRetrier:
    config = RetryConfig.model_validate({"jitter": False, **cfg})
    return StatementRetrier(
        config, breaker or CircuitBreaker(0, adapter="wh"), sleep=sleeps or Sleeps(), rand=rand
    )


def _state(breaker: CircuitBreaker) -> str:
    return breaker.state  # a call, so mypy does not keep an earlier narrowing of the property


# --- backoff ---------------------------------------------------------------------------------------


def test_backoff_grows_exponentially_and_is_capped() -> None:
    r = _retrier()  # defaults: 1000 ms, x2, capped at 30000 ms
    assert [r.backoff_ms(n) for n in range(7)] == [1000, 2000, 4000, 8000, 16000, 30000, 30000]
    assert [r.delay_seconds(n) for n in range(3)] == [1.0, 2.0, 4.0]
    r = _retrier(initial_backoff_ms=100, backoff_multiplier=3.0, max_backoff_ms=1000)
    assert [r.backoff_ms(n) for n in range(4)] == [100, 300, 900, 1000]


def test_full_jitter_draws_below_the_backoff() -> None:
    draws = iter([0.0, 0.25, 0.999999])
    r = _retrier(jitter=True, rand=lambda: next(draws))
    assert r.delay_seconds(0) == 0.0
    assert r.delay_seconds(1) == pytest.approx(0.5)
    assert 3.99 < r.delay_seconds(2) < 4.0


def test_jitter_bounds_hold_for_many_draws() -> None:
    import random

    rng = random.Random(7)
    r = _retrier(jitter=True, rand=rng.random, initial_backoff_ms=200, max_backoff_ms=1500)
    for n in range(8):
        for _ in range(50):
            assert 0.0 <= r.delay_seconds(n) < r.backoff_ms(n) / 1000


# --- the retry loop --------------------------------------------------------------------------------


def test_transient_and_connection_failures_are_retried_with_backoff(caplog: pytest.LogCaptureFixture) -> None:
    sleeps = Sleeps()
    fn = Flaky("transient", "connection-failed")
    with caplog.at_level(logging.WARNING, logger="rocky"):
        assert _retrier(sleeps).call(fn, "statement 'X'") == "ok"
    assert fn.attempts == 3
    assert sleeps.calls == [1.0, 2.0]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "adapter 'wh': statement 'X' failed (transient): boom 1; retry 1/3 in 1.00 s",
        "adapter 'wh': statement 'X' failed (connection-failed): boom 2; retry 2/3 in 2.00 s",
    ]


@pytest.mark.parametrize(
    "kind", ["auth-failed", "query-rejected", "quota-exceeded", "not-found", "compile-error", "unknown"]
)
def test_permanent_errors_are_never_retried(kind: str) -> None:
    sleeps = Sleeps()
    fn = Flaky(kind)
    with pytest.raises(AdapterError) as info:
        _retrier(sleeps).call(fn)
    assert info.value.failure_kind == kind
    assert fn.attempts == 1 and sleeps.calls == []


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    sleeps = Sleeps()
    fn = Flaky(*["transient"] * 10)
    with pytest.raises(AdapterError, match="boom 3"):
        _retrier(sleeps, max_retries=2).call(fn)
    assert fn.attempts == 3 and sleeps.calls == [1.0, 2.0]


def test_zero_retries_means_one_attempt() -> None:
    fn = Flaky("transient")
    with pytest.raises(AdapterError):
        _retrier(max_retries=0).call(fn)
    assert fn.attempts == 1


def test_a_stop_request_ends_retrying() -> None:
    stop = threading.Event()
    sleeps = Sleeps(on_first=stop.set)
    fn = Flaky("transient", "transient")
    with pytest.raises(AdapterError, match="boom 1"):
        _retrier(sleeps).call(fn, stop=stop)
    assert fn.attempts == 1


def test_on_retry_sees_each_retried_error() -> None:
    seen: list[str] = []
    fn = Flaky("connection-failed", "transient")
    _retrier().call(fn, on_retry=lambda exc: seen.append(exc.failure_kind))
    assert seen == ["connection-failed", "transient"]


# --- the breaker -----------------------------------------------------------------------------------


def test_breaker_opens_after_threshold_and_fails_fast() -> None:
    breaker = CircuitBreaker(3, adapter="wh")
    sleeps = Sleeps()
    r = _retrier(sleeps, breaker=breaker, max_retries=1)
    first = Flaky(*["connection-failed"] * 5)
    with pytest.raises(AdapterError, match="boom 2"):
        r.call(first)
    second = Flaky(*["connection-failed"] * 5)
    # The third consecutive failure opens the breaker: no retry even though one is left.
    with pytest.raises(AdapterError, match="boom 1"):
        r.call(second)
    assert breaker.state == "open" and second.attempts == 1
    third = Flaky()
    with pytest.raises(AdapterError) as info:
        r.call(third)
    assert third.attempts == 0
    assert info.value.failure_kind == "quota-exceeded"
    assert str(info.value) == OPEN_MSG.format(n=3, a="wh") + (
        "; check that the warehouse is reachable, then run again"
    )
    assert sleeps.calls == [1.0]


def test_a_warehouse_answer_resets_the_consecutive_count() -> None:
    breaker = CircuitBreaker(2, adapter="wh")
    r = _retrier(breaker=breaker, max_retries=0)
    with pytest.raises(AdapterError):
        r.call(Flaky("transient"))
    with pytest.raises(AdapterError):
        r.call(Flaky("query-rejected"))  # the warehouse answered
    assert breaker.consecutive_failures == 0
    with pytest.raises(AdapterError):
        r.call(Flaky("transient"))
    assert breaker.state == "closed"


def test_threshold_zero_disables_the_breaker() -> None:
    breaker = CircuitBreaker(0, adapter="wh")
    r = _retrier(breaker=breaker, max_retries=0)
    for _ in range(20):
        with pytest.raises(AdapterError, match="boom"):
            r.call(Flaky("connection-failed"))
    assert breaker.state == "closed" and r.call(Flaky()) == "ok"


def test_without_recovery_timeout_the_breaker_stays_open() -> None:
    clock = Clock()
    breaker = CircuitBreaker(1, None, clock, adapter="wh")
    breaker.record_failure()
    clock.now += 10**6
    with pytest.raises(AdapterError, match="circuit breaker open"):
        breaker.before_call()


def test_half_open_lets_one_probe_through_after_the_recovery_timeout() -> None:
    clock = Clock()
    breaker = CircuitBreaker(2, 30, clock, adapter="wh")
    r = _retrier(breaker=breaker, max_retries=0)
    for _ in range(2):
        with pytest.raises(AdapterError, match="boom"):
            r.call(Flaky("transient"))
    clock.now += 29
    with pytest.raises(AdapterError) as info:
        r.call(Flaky())
    assert str(info.value).endswith("one statement probes the warehouse again 30 s after the breaker opened")
    clock.now += 1
    # A failed probe opens the breaker again, for a new recovery period.
    with pytest.raises(AdapterError, match="boom 1"):
        r.call(Flaky("transient"))
    assert breaker.state == "open"
    with pytest.raises(AdapterError, match="circuit breaker open"):
        r.call(Flaky())
    clock.now += 30
    assert r.call(Flaky()) == "ok"
    assert _state(breaker) == "closed" and breaker.consecutive_failures == 0


def test_only_one_probe_while_half_open() -> None:
    clock = Clock()
    breaker = CircuitBreaker(1, 5, clock, adapter="wh")
    breaker.record_failure()
    clock.now += 5
    breaker.before_call()  # the probe
    assert breaker.state == "half-open"
    with pytest.raises(AdapterError, match="circuit breaker open"):
        breaker.before_call()
    breaker.abandon()  # the probe ended without a verdict: the next call may probe
    breaker.before_call()


# --- real faults on PostgreSQL ---------------------------------------------------------------------


def _pg_cfg(db: PgDatabase) -> PostgresAdapterConfig:
    s = db.server
    return PostgresAdapterConfig.model_validate(
        {"host": s.host, "port": s.port, "user": s.user, "password": s.password, "dbname": db.name}
    )


@pytest.fixture
def raw(pg_db: PgDatabase) -> Iterator[PostgresAdapter]:
    adapter = PostgresAdapter.connect("wh", _pg_cfg(pg_db))
    yield adapter
    adapter.close()


def _wrap(
    adapter: PostgresAdapter, sleeps: Sleeps, clock: Clock | None = None, **cfg: object
) -> RetryingAdapter:
    config = RetryConfig.model_validate({"jitter": False, "initial_backoff_ms": 100, **cfg})
    return RetryingAdapter(adapter, config, sleep=sleeps, clock=clock or Clock())


@pytest.mark.services
def test_statement_survives_a_server_restart_within_the_retry_window(
    raw: PostgresAdapter, pg_server: PgServer
) -> None:
    sleeps = Sleeps(on_first=pg_server.start)  # the server comes back while the retrier waits
    wh = _wrap(raw, sleeps)
    session = wh.session()
    session.execute("CREATE TABLE t (id int)")
    pg_server.stop()
    assert session.execute("INSERT INTO t VALUES (1)") == 1
    assert sleeps.calls == [0.1]
    assert isinstance(session, RetryingSession) and isinstance(session.inner, PostgresSession)
    assert session.inner.connects == 2
    assert wh.query("SELECT count(*) FROM t") == [(1,)]  # the adapter's own connection recovers too
    session.close()


@pytest.mark.services
def test_terminated_backend_is_retried_on_a_new_connection(
    raw: PostgresAdapter, pg_db: PgDatabase, pg_server: PgServer
) -> None:
    sleeps = Sleeps()
    wh = _wrap(raw, sleeps)
    pid = wh.query("SELECT pg_backend_pid()")[0][0]
    assert pg_server.terminate_backends(pg_db.name) == 1
    assert wh.query("SELECT pg_backend_pid()")[0][0] != pid
    assert sleeps.calls == [0.1]


@pytest.mark.services
def test_syntax_errors_are_never_retried(raw: PostgresAdapter) -> None:
    sleeps = Sleeps()
    wh = _wrap(raw, sleeps)
    attempts = 0

    def statement() -> int | None:
        nonlocal attempts
        attempts += 1
        return raw.execute("SELEC 1")

    with pytest.raises(AdapterError) as info:
        wh.retrier.call(statement)
    assert info.value.failure_kind == "compile-error"
    assert attempts == 1 and sleeps.calls == []
    with pytest.raises(AdapterError):
        wh.execute("SELEC 1")
    assert sleeps.calls == [] and wh.breaker.consecutive_failures == 0


@pytest.mark.services
def test_breaker_opens_against_a_stopped_server_and_fails_fast(
    raw: PostgresAdapter, pg_server: PgServer
) -> None:
    sleeps = Sleeps()
    clock = Clock()
    wh = _wrap(raw, sleeps, clock, max_retries=1, circuit_breaker_threshold=3,
               circuit_breaker_recovery_timeout_secs=60)
    session = wh.session()
    assert isinstance(session, RetryingSession) and isinstance(session.inner, PostgresSession)
    session.execute("SELECT 1")
    pg_server.stop()
    with pytest.raises(AdapterError) as first:
        session.execute("SELECT 1")  # 2 attempts: the dead connection, then a refused reconnect
    assert first.value.failure_kind == "connection-failed"
    with pytest.raises(AdapterError, match="terminating connection due to administrator command"):
        wh.execute("SELECT 1")  # the adapter's own dead connection: the third failure opens the breaker
    assert wh.breaker.state == "open"
    connects = (session.inner.connects, raw.connects)
    for target in (session, wh, wh.session()):
        with pytest.raises(AdapterError) as fast:
            target.execute("SELECT 1")
        assert str(fast.value).startswith(OPEN_MSG.format(n=3, a="wh"))
        assert fast.value.failure_kind == "quota-exceeded"
    with pytest.raises(AdapterError, match="circuit breaker open"):
        wh.list_relations()
    with pytest.raises(AdapterError, match="circuit breaker open"), session.transaction():
        pass
    assert (session.inner.connects, raw.connects) == connects  # nothing touched the network
    assert sleeps.calls == [0.1]
    # After the recovery timeout one probe goes through; the server is back, the breaker closes.
    pg_server.start()
    clock.now += 60
    assert session.query("SELECT 1") == [(1,)]
    assert _state(wh.breaker) == "closed"
    session.close()


@pytest.mark.services
def test_atomic_retries_the_whole_transaction_after_a_connection_loss(
    raw: PostgresAdapter, pg_db: PgDatabase, pg_server: PgServer
) -> None:
    sleeps = Sleeps()
    wh = _wrap(raw, sleeps)
    session = wh.session()
    runs = 0

    def unit() -> None:
        nonlocal runs
        runs += 1
        session.execute("CREATE TABLE t (id int)")
        if runs == 1:
            pg_server.terminate_backends(pg_db.name)
        session.execute("INSERT INTO t VALUES (1)")

    assert isinstance(session, RetryingSession)
    session.atomic(unit)
    assert runs == 2 and sleeps.calls == [0.1]
    assert wh.query("SELECT id FROM t") == [(1,)]  # the first attempt left nothing behind
    session.close()


@pytest.mark.services
def test_statements_inside_a_transaction_are_not_retried(
    raw: PostgresAdapter, pg_db: PgDatabase, pg_server: PgServer
) -> None:
    sleeps = Sleeps()
    wh = _wrap(raw, sleeps, circuit_breaker_threshold=5)
    session = wh.session()
    session.execute("CREATE TABLE t (id int)")
    with pytest.raises(AdapterError) as info, session.transaction():
        session.execute("INSERT INTO t VALUES (1)")
        pg_server.terminate_backends(pg_db.name)
        session.execute("INSERT INTO t VALUES (2)")
    assert info.value.failure_kind == "connection-failed"
    assert sleeps.calls == []
    assert wh.breaker.consecutive_failures == 1  # still fed to the breaker
    assert session.query("SELECT count(*) FROM t") == [(0,)]  # rolled back; the session reconnected
    session.close()


@pytest.mark.services
def test_open_adapter_retries_the_connect_and_reports_it_in_one_line(
    pg_db: PgDatabase, pg_server: PgServer, tmp_path: object
) -> None:
    from pathlib import Path

    from rocky_engine.adapters import open_adapter
    from rocky_engine.config.loader import load_config

    root = Path(str(tmp_path))
    (root / "rocky.toml").write_text(
        f"""
[adapter.wh]
type = "postgres"
host = "127.0.0.1"
port = {pg_server.port}
user = "rocky"
password = "{pg_server.password}"
dbname = "{pg_db.name}"
[adapter.wh.retry]
initial_backoff_ms = 1
max_retries = 2
"""
    )
    config = load_config(root / "rocky.toml")
    wh = open_adapter(config, "wh")
    assert isinstance(wh, RetryingAdapter) and wh.default_schema == "public"
    assert wh.query("SELECT 1") == [(1,)]
    wh.close()
    pg_server.stop()
    with pytest.raises(AdapterError) as info:
        open_adapter(config, "wh")
    assert str(info.value) == (
        f"cannot connect to PostgreSQL adapter 'wh' at 127.0.0.1:{pg_server.port}/{pg_db.name}: connection "
        "refused; check host/port and that the server is running"
    )
