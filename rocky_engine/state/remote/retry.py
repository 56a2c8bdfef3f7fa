"""``[state.retry]``: retry a state transfer that failed transiently (upstream Rocky's form).

A transfer (the download before a run, the upload after it) is tried up to ``max_retries + 1`` times, with
``initial_backoff_ms * backoff_multiplier**n`` (capped at ``max_backoff_ms``; a uniform draw below it with
``jitter``) between attempts. A lost ``cas`` race (:class:`PreconditionFailed`) is an answer, never retried.
``circuit_breaker_threshold`` consecutive failed attempts make later transfers of this sync fail at once
(until ``circuit_breaker_recovery_timeout_secs`` lets one through); ``max_retries_per_run`` caps the
retries of all transfers together. The caller bounds the whole loop with ``transfer_timeout_seconds``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from rocky_engine.logs import get_logger
from rocky_engine.state.remote.backend import RemoteStateError

if TYPE_CHECKING:
    from rocky_engine.config.sections import StateRetry

T = TypeVar("T")

log = get_logger("state.remote")


class TransferRetrier:
    """The retry loop of one sync's transfers (shared, so the breaker and the run budget span them)."""

    def __init__(
        self,
        cfg: StateRetry,
        *,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.cfg = cfg
        self._sleep = sleep
        self._clock = clock
        self._rand = rand
        self._consecutive_failures = 0
        self._opened_at: float | None = None
        self._retries_used = 0

    def delay_seconds(self, retry: int) -> float:
        """The wait before retry ``retry`` (0-based)."""
        cfg = self.cfg
        ceiling = min(cfg.initial_backoff_ms * cfg.backoff_multiplier**retry, cfg.max_backoff_ms)
        return (ceiling * self._rand() if cfg.jitter else ceiling) / 1000.0

    def call(self, fn: Callable[[], T], what: str) -> T:
        """``fn()``, retried on :class:`RemoteStateError` per ``[state.retry]``.

        Raises:
            RemoteStateError: the last failure, or the open breaker's.
        """
        retry = 0
        while True:
            self._before_attempt(what)
            try:
                result = fn()
            except RemoteStateError as exc:
                self._consecutive_failures += 1
                if self._breaker_trips():
                    raise
                if retry >= self.cfg.max_retries or not self._budget_left():
                    raise
                delay = self.delay_seconds(retry)
                log.warning(f"{what} failed ({exc.message}); retry {retry + 1}/{self.cfg.max_retries} "
                            f"in {delay:.2f} s ([state.retry])")
                self._sleep(delay)
                self._retries_used += 1
                retry += 1
                continue
            self._consecutive_failures = 0
            self._opened_at = None
            return result

    def _before_attempt(self, what: str) -> None:
        if self._opened_at is None:
            return
        timeout = self.cfg.circuit_breaker_recovery_timeout_secs
        if timeout is not None and self._clock() - self._opened_at >= timeout:
            return  # half-open: this one attempt may go through
        raise RemoteStateError(
            f"{what} not attempted: the state backend failed {self._consecutive_failures} times in a row "
            f"([state.retry] circuit_breaker_threshold = {self.cfg.circuit_breaker_threshold})",
            hint="check the network path to the state backend",
        )

    def _breaker_trips(self) -> bool:
        threshold = self.cfg.circuit_breaker_threshold
        if threshold and self._consecutive_failures >= threshold:
            self._opened_at = self._clock()
            return True
        return False

    def _budget_left(self) -> bool:
        budget = self.cfg.max_retries_per_run
        return budget is None or self._retries_used < budget
