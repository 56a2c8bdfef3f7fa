"""Syntax checks of a schedule's cron expression and time zone, shared by ``rocky validate`` and the
scheduler.

Kept apart from ``validation`` (which builds the whole ``rocky validate`` report) so that a quiet
``rocky tick`` can check the time zones of its plan without importing the validator.
"""

from __future__ import annotations


def cron_problem(expr: str) -> str | None:
    """Why ``expr`` is not a usable 5-field cron expression, or None when it is."""
    from croniter import croniter

    fields = expr.split()
    if len(fields) != 5:
        return (
            f"cron '{expr}' has {len(fields)} fields; write exactly 5: minute hour day-of-month month "
            'day-of-week (e.g. "0 3 * * *")'
        )
    if not croniter.is_valid(expr):
        return f"cron '{expr}' is not a valid cron expression (minute hour day-of-month month day-of-week)"
    return None


def timezone_problem(name: str) -> str | None:
    """Why ``name`` is not a usable IANA time zone, or None when it is."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return f'unknown timezone \'{name}\'; use an IANA name such as "UTC" or "Europe/Lisbon"'
    return None
