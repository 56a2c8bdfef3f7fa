"""Pieces of the Markdown that ``rocky brief`` and ``rocky history`` print for Slack and mail.

Slack renders neither tables nor ``#`` headings, so both digests use ``*bold*`` titles, ``-`` bullets and
inline ``code``; these are the words and the time format they share, so a run reads the same in both.
"""

from __future__ import annotations

from datetime import datetime

#: how a run status that needs attention is written (a success is not shouted)
STATUS_WORD = {"PartialFailure": "PARTIAL", "Failure": "FAILED"}


def when(stamp: str) -> str:
    """``2026-05-02T03:00:00.000Z`` -> ``2026-05-02 03:00 UTC`` (anything else is returned as it is)."""
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return moment.strftime("%Y-%m-%d %H:%M UTC")
