"""One circuit breaker per adapter per run (``[adapter.NAME.retry]`` ``circuit_breaker_*``).

Every failed attempt of a statement (or an API call) counts towards ``circuit_breaker_threshold``
consecutive failures; once the breaker is open every call on that adapter fails fast without touching the
warehouse, until ``circuit_breaker_recovery_timeout_secs`` lets one probe through (half-open) or, when
unset, for the rest of the run. Any answer from the warehouse, even a permanent error such as a syntax
error, proves it is reachable and resets the count.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Literal

from rocky_engine.config.adapters import RetryConfig
from rocky_engine.errors import AdapterError
from rocky_engine.logs import get_logger

BreakerState = Literal["closed", "open", "half-open"]


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failures (0 disables it); thread-safe, one per adapter."""

    def __init__(
        self,
        threshold: int,
        recovery_timeout_secs: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        adapter: str = "warehouse",
        log: logging.Logger | None = None,
    ) -> None:
        self.threshold = threshold
        self.recovery_timeout_secs = recovery_timeout_secs
        self.adapter = adapter
        self._clock = clock
        self._log = log or get_logger("retry")
        self._lock = threading.Lock()
        self._state: BreakerState = "closed"
        self._failures = 0
        self._opened_at = 0.0
        self._probing = False

    @classmethod
    def for_adapter(
        cls, adapter: str, cfg: RetryConfig, clock: Callable[[], float] = time.monotonic
    ) -> CircuitBreaker:
        return cls(
            cfg.circuit_breaker_threshold, cfg.circuit_breaker_recovery_timeout_secs, clock, adapter=adapter
        )

    @property
    def state(self) -> BreakerState:
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def before_call(self) -> None:
        """Let a call through, or raise the fail-fast error while the breaker is open.

        Raises:
            AdapterError: ``quota-exceeded``, the breaker is open (or a half-open probe is in flight).
        """
        if self._state == "closed":  # the hot path takes no lock
            return
        with self._lock:
            if self._state == "open":
                timeout = self.recovery_timeout_secs
                if timeout is None or self._clock() - self._opened_at < timeout:
                    raise self.open_error()
                self._state = "half-open"
                self._log.warning("circuit breaker of adapter '%s' half-open: probing with one statement",
                                  self.adapter)
            elif self._state == "half-open" and self._probing:
                raise self.open_error()
            if self._state == "half-open":
                self._probing = True

    def record_success(self) -> None:
        """The warehouse answered: close the breaker and reset the count."""
        if self._state == "closed" and self._failures == 0:
            return
        with self._lock:
            if self._state != "closed":
                self._log.warning("circuit breaker of adapter '%s' closed: the warehouse answers again",
                                  self.adapter)
            self._state = "closed"
            self._failures = 0
            self._probing = False

    def record_failure(self) -> bool:
        """Count one failed attempt; True when this failure opened the breaker."""
        with self._lock:
            self._failures += 1
            if self.threshold <= 0:
                return False
            if self._state == "half-open" or (self._state == "closed" and self._failures >= self.threshold):
                self._state = "open"
                self._opened_at = self._clock()
                self._probing = False
                self._log.warning(
                    "circuit breaker of adapter '%s' opened after %d consecutive failures; remaining "
                    "statements fail fast", self.adapter, self._failures,
                )
                return True
            return False

    def abandon(self) -> None:
        """A call ended without a warehouse verdict (e.g. a bug or an interrupt): free the probe slot."""
        with self._lock:
            self._probing = False

    def open_error(self) -> AdapterError:
        cooldown: int | None = None
        if self.recovery_timeout_secs is None:
            hint = "check that the warehouse is reachable, then run again"
        else:
            hint = (f"one statement probes the warehouse again {self.recovery_timeout_secs} s after the "
                    "breaker opened")
            # What an orchestrator waits before a re-run (the run's errors[].cooldown_seconds): the rest of
            # the recovery timeout, rounded up so a re-run never lands before the probe would.
            left = self.recovery_timeout_secs - (self._clock() - self._opened_at)
            cooldown = max(0, math.ceil(left))
        return AdapterError(
            f"circuit breaker open after {self._failures} consecutive failures on adapter '{self.adapter}'; "
            "remaining statements fail fast",
            # the published kind of a tripped breaker (rocky-sdk: "a configured budget cap (retry budget,
            # circuit breaker ...)"): a consumer retries it after cooldown_seconds (dagster_rocky raises
            # RetryRequested), and table_retries does not re-attempt a table that would only fail fast again
            failure_kind="quota-exceeded",
            hint=hint,
            cooldown_seconds=cooldown,
        )
