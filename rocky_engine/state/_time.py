"""Timestamps as the state store keeps them: UTC text that sorts like the instant it names.

Every timestamp column holds ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (fixed width, always microseconds), so
``ORDER BY`` and range filters on the text are chronological and can use the indexes.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive datetime is taken to be UTC already (the engine's clock is UTC)."""
    tz = value.tzinfo
    if tz is UTC:  # the common case (every stored timestamp parses to it): no new object
        return value
    if tz is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def now_utc() -> datetime:
    return datetime.now(UTC)


def to_db(value: datetime) -> str:
    """The stored text form of ``value``."""
    return utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def to_db_opt(value: datetime | None) -> str | None:
    return None if value is None else to_db(value)


def from_db(text: str) -> datetime:
    """Parse a stored timestamp (also accepts any ISO 8601 form a hand-edited row might carry)."""
    return utc(datetime.fromisoformat(text))


def from_db_opt(text: str | None) -> datetime | None:
    return None if text is None else from_db(text)


def rfc3339(value: datetime) -> str:
    """RFC 3339 UTC with ``Z`` and millisecond precision, the form JSON output uses."""
    return utc(value).isoformat(timespec="milliseconds").replace("+00:00", "Z")
