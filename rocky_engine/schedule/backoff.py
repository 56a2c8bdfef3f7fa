"""The scheduler's backoff after a failed or partial scheduled run (CONTRACT section 6).

It applies to ``after`` and ``freshness`` demand only: those sources stay due until the pipeline succeeds,
so without a backoff a broken pipeline would be relaunched every tick. Cron never backs off (each
occurrence fires once whatever happened to the previous one), and a webhook demand is attempted once.

- failure: skip until ``last_attempt + min(5 min x 2^(consecutive_failures - 1), 6 h)``
  (5, 10, 20, 40, 80, 160, 320 minutes, then 6 hours);
- partial: skip until ``last_attempt + 60 min`` (progress was made; retry on a calm, fixed cadence).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

FAILURE_BASE = timedelta(minutes=5)
FAILURE_CAP = timedelta(hours=6)
PARTIAL_DELAY = timedelta(minutes=60)

BackoffReason = Literal["failure_backoff", "partial_backoff"]


def failure_delay(consecutive_failures: int) -> timedelta:
    """The wait after the ``consecutive_failures``-th failure in a row (1-based)."""
    if consecutive_failures < 1:
        return timedelta(0)
    # Cap the exponent before multiplying: 2**N for a long streak would be a huge integer for nothing.
    exponent = min(consecutive_failures - 1, 16)
    delay: timedelta = FAILURE_BASE * (2**exponent)
    return min(delay, FAILURE_CAP)


@dataclass(frozen=True)
class Backoff:
    reason: BackoffReason
    resume_at: datetime


def earned_backoff(
    last_outcome: str | None, consecutive_failures: int, last_attempt_at: datetime | None
) -> Backoff | None:
    """The backoff the last attempt earned, whatever the time: it is in force until ``resume_at``.

    Apart from :func:`active_backoff` so that a reader that keeps a rendering (the server's schedule
    document) knows the instants at which the throttle it shows appears or lapses."""
    if last_attempt_at is None:
        return None
    if last_outcome == "partial":
        return Backoff("partial_backoff", last_attempt_at + PARTIAL_DELAY)
    if last_outcome == "failure" and consecutive_failures > 0:
        return Backoff("failure_backoff", last_attempt_at + failure_delay(consecutive_failures))
    return None


def active_backoff(
    last_outcome: str | None,
    consecutive_failures: int,
    last_attempt_at: datetime | None,
    now: datetime,
) -> Backoff | None:
    """The backoff in force at ``now``, or None when after/freshness demand may run."""
    earned = earned_backoff(last_outcome, consecutive_failures, last_attempt_at)
    return earned if earned is not None and now < earned.resume_at else None
