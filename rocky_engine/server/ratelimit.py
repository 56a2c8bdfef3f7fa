"""A token bucket for the webhook ingress: a flood is shed with 429 before anything is written."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` held; :meth:`take` spends one or says how long to wait.

    Args:
        rate: sustained requests per second (must be > 0).
        burst: the bucket size, the flood it absorbs at once (at least 1).
        clock: monotonic seconds (injected by tests).
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self._clock = clock
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """0.0 when a token was spent; otherwise the seconds until one will be available."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / self.rate


def retry_after_header(wait_seconds: float) -> str:
    """``Retry-After`` in whole seconds, never 0 (a client retrying at once would be shed again)."""
    return str(max(1, math.ceil(wait_seconds)))
