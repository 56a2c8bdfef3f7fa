"""Run independent tables concurrently: fixed or adaptive concurrency, per-table retries, early stops.

- ``concurrency = N``: at most N tables in flight. ``"adaptive"``: start at 4; halve (never below 1) when
  a table fails with a transient, connection or quota error; after ``limit`` successes in a row (one
  round at the current level) allow one more, up to 32.
- ``table_retries``: a failed table is attempted again, at once, up to that many times, but only when
  the error may pass (``transient``, ``connection-failed``, ``unknown``); a permanent error
  (``query-rejected``, ``not-found``, ``auth-failed`` ...) is final at the first attempt.
- ``fail_fast``: the first final failure stops scheduling; ``error_rate_abort_pct`` (0 disables): once at
  least 4 tables are done, a failure share at or above it stops scheduling. Tables in flight finish; the
  rest come back in ``not_run`` with the reason. A hook that aborts (``on_failure = "abort"``) stops
  scheduling the same way.

Workers (one session, or a source/target session pair, per thread) are created lazily, never more than
the highest concurrency reached, and reused across tables. When tables finish, their retry and stop
decisions are taken first, then the free workers get their next tables, and only then does ``on_done``
(the runner's bookkeeping: output, state flushes) run, so a worker never idles while the scheduling
thread records another table.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Literal, TypeVar

from rocky_engine.adapters.base import Maintenance
from rocky_engine.adapters.retry import RetriedAttempt
from rocky_engine.errors import AdapterError, HookAbort
from rocky_engine.run.maintenance_gate import MaintenanceGate
from rocky_engine.state._time import now_utc

T = TypeVar("T")
W = TypeVar("W")

ADAPTIVE_START = 4
ADAPTIVE_CEILING = 32
MIN_COMPLETED_FOR_ABORT = 4
#: errors that may pass on another attempt
RETRYABLE_TABLE_KINDS = frozenset({"transient", "connection-failed", "unknown"})
#: errors that say the warehouse is under pressure: adaptive concurrency backs off
PRESSURE_KINDS = frozenset({"transient", "connection-failed", "quota-exceeded"})


class NotStarted(Exception):
    """A signal came while the table's ``before_*`` hooks ran: its statement is never sent. The runner
    reports it as a table the run did not start (``not run: the run was interrupted``), not as a failure."""


def failure_kind_of(error: BaseException | None) -> str:
    if isinstance(error, AdapterError):
        return error.failure_kind
    # A hook abort is not a warehouse failure; the contract's catch-all kind plus the hook's message
    # (which names the hook) keeps consumers that switch on failure_kind working; ``cause_of`` says it.
    return "unknown"


def cooldown_of(error: BaseException | None) -> int | None:
    """The seconds before a re-run can work (``errors[].cooldown_seconds``): an open circuit breaker with
    a recovery timeout says when it lets a probe through; other errors carry no hint."""
    return error.cooldown_seconds if isinstance(error, AdapterError) else None


def cause_of(error: BaseException | None) -> Literal["hook-abort"] | None:
    """What stopped a table or a run when it is not a failure ``failure_kind`` describes (``errors[].cause``):
    an ``on_failure = "abort"`` hook."""
    return "hook-abort" if isinstance(error, HookAbort) else None


class ConcurrencyLimit:
    """How many tables may be in flight now."""

    def __init__(self, setting: int | Literal["adaptive"], *, tables: int) -> None:
        self.adaptive = setting == "adaptive"
        start = ADAPTIVE_START if setting == "adaptive" else int(setting)
        self.ceiling = ADAPTIVE_CEILING if self.adaptive else start
        self.limit = max(1, min(start, max(tables, 1)))
        self.peak = self.limit
        self._streak = 0
        self._tables = max(tables, 1)

    def on_success(self) -> None:
        if not self.adaptive:
            return
        self._streak += 1
        if self._streak >= self.limit and self.limit < min(self.ceiling, self._tables):
            self.limit += 1
            self.peak = max(self.peak, self.limit)
            self._streak = 0

    def on_pressure(self) -> None:
        if not self.adaptive:
            return
        self.limit = max(1, self.limit // 2)
        self._streak = 0

    @property
    def max_workers(self) -> int:
        return min(self.ceiling, self._tables) if self.adaptive else self.limit


@dataclass(slots=True)
class TaskResult(Generic[T]):
    """The final outcome of one table (after its retries)."""

    name: str
    started_at: datetime
    duration_ms: int
    attempts: int
    value: T | None = None
    error: BaseException | None = None
    #: the tries before the last one (``table_retries``), for the table's retry trail (``run.attempts``)
    retried: list[RetriedAttempt] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class TableRun(Generic[T]):
    outcomes: dict[str, TaskResult[T]] = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)
    #: why scheduling stopped early (fail_fast, error rate); None when it did not
    stop_reason: str | None = None


@dataclass
class StopRules:
    retries: int = 1
    fail_fast: bool = False
    error_rate_abort_pct: int = 50


def run_tables(
    names: Sequence[str],
    task: Callable[[str, W], T],
    new_worker: Callable[[], W],
    limit: ConcurrencyLimit,
    rules: StopRules,
    *,
    stop: threading.Event,
    on_done: Callable[[TaskResult[T]], None] | None = None,
    on_retry: Callable[[str, BaseException, int], None] | None = None,
    maintenance: Maintenance | None = None,
    clock: Callable[[], datetime] = now_utc,
) -> tuple[TableRun[T], list[W]]:
    """Run ``task(name, worker)`` for every name; returns the run and the workers created (to close).

    When ``maintenance`` is due no new table starts; it runs once the running ones finish. ``clock``
    (the run's) stamps each table's first start.
    """
    result: TableRun[T] = TableRun()
    queue: deque[tuple[str, int]] = deque((n, 1) for n in names)
    workers: list[W] = []
    free: list[W] = []
    first_start: dict[str, tuple[datetime, float]] = {}
    #: per table, its latest try's start (``perf_counter``), and the tries that were retried
    try_start: dict[str, float] = {}
    retried: dict[str, list[RetriedAttempt]] = {}
    succeeded = failed = 0
    lock = threading.Lock()

    def execute(name: str, attempt: int, worker: W) -> tuple[str, int, W, T | None, BaseException | None]:
        with lock:
            first_start.setdefault(name, (clock(), time.perf_counter()))
            try_start[name] = time.perf_counter()
        try:
            return name, attempt, worker, task(name, worker), None
        except BaseException as exc:  # contained per table, reported by the runner
            return name, attempt, worker, None, exc

    def settle(name: str, attempt: int, value: T | None, error: BaseException | None) -> TaskResult[T] | None:
        """Decide a finished attempt: queued again (None), or final (its result; stop rules applied)."""
        nonlocal succeeded, failed
        kind = failure_kind_of(error)
        if error is not None and kind in PRESSURE_KINDS:
            limit.on_pressure()
        if error is not None and attempt <= rules.retries and kind in RETRYABLE_TABLE_KINDS \
                and not stop.is_set() and isinstance(error, Exception) and not isinstance(error, HookAbort):
            if on_retry is not None:
                on_retry(name, error, attempt)
            t_try = try_start[name]
            retried.setdefault(name, []).append(RetriedAttempt(
                t_try, int((time.perf_counter() - t_try) * 1000), str(error), kind, backoff_ms=0  # at once
            ))
            queue.appendleft((name, attempt + 1))
            return None
        started, t0 = first_start[name]
        outcome = TaskResult(name, started, int((time.perf_counter() - t0) * 1000), attempt, value, error,
                             retried.pop(name, []))
        result.outcomes[name] = outcome
        if error is None:
            succeeded += 1
            limit.on_success()
        else:
            failed += 1
            if isinstance(error, HookAbort) and result.stop_reason is None:
                result.stop_reason = f"an on_{error.event} hook aborted the run at {name}"
            if rules.fail_fast and result.stop_reason is None:
                result.stop_reason = f"fail_fast is set and {name} failed"
        done = succeeded + failed
        pct = rules.error_rate_abort_pct
        too_many = pct > 0 and done >= MIN_COMPLETED_FOR_ABORT and failed * 100 >= pct * done
        if result.stop_reason is None and too_many:
            result.stop_reason = (
                f"{failed} of {done} tables failed ({failed * 100 // done}%), at or above "
                f"error_rate_abort_pct = {pct}"
            )
        return outcome

    def report(outcome: TaskResult[T] | None) -> None:
        if outcome is not None and on_done is not None:
            on_done(outcome)

    def may_start() -> bool:
        return bool(queue) and not stop.is_set() and result.stop_reason is None

    def take_worker() -> W:
        if free:
            return free.pop()
        worker = new_worker()
        workers.append(worker)
        return worker

    gate = MaintenanceGate(maintenance)
    if limit.max_workers <= 1:
        while may_start():
            gate.open(running=0)
            name, attempt = queue.popleft()
            _, _, worker, value, error = execute(name, attempt, take_worker())
            free.append(worker)
            report(settle(name, attempt, value, error))
    else:
        in_flight: set[Future[tuple[str, int, W, T | None, BaseException | None]]] = set()
        with ThreadPoolExecutor(max_workers=limit.max_workers, thread_name_prefix="rocky-repl") as pool:

            def fill() -> None:
                while may_start() and len(in_flight) < limit.limit and gate.open(running=len(in_flight)):
                    name, attempt = queue.popleft()
                    in_flight.add(pool.submit(execute, name, attempt, take_worker()))

            fill()
            while in_flight:
                done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                finished: list[TaskResult[T] | None] = []
                for fut in sorted(done, key=lambda f: f.result()[0]):
                    name, attempt, worker, value, error = fut.result()
                    free.append(worker)
                    finished.append(settle(name, attempt, value, error))
                fill()
                for outcome in finished:
                    report(outcome)
    seen = set(result.outcomes)
    result.not_run = [n for n in names if n not in seen]
    return result, workers
