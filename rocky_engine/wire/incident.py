"""Incident bundles: ``.rocky/incidents/<YYYYMMDDTHHMMSSZ>-<pipeline>-<shortid>.json`` (CONTRACT section 6).

One file of facts per scheduled run that finalized as a failure or a partial, read by operators and by
``rocky brief``. A fact the writer cannot know (the exit code of a run recovered from a crashed owner) is
``null``, never a guessed zero, so every key is always written.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine.wire.base import WireModel

INCIDENT_VERSION = 1


class IncidentPointer(WireModel):
    """Where to look next: a ``rocky history`` command, the run, the server's job and schedule routes."""

    kind: Literal["history", "run", "job", "schedule"]
    #: ``history``: the command to run, and what to look for in its output
    command: str | None = None
    match: str | None = None
    #: ``run``
    run_id: str | None = None
    #: ``job`` / ``schedule``: the server route
    url: str | None = None


class IncidentDocument(WireModel):
    """``{incident_version: 1, recorded_at, pipeline, source, outcome, logical_ts, submission_id, exit_code,
    attempts, consecutive_failures, pointers[]}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"incident_version", "logical_ts", "exit_code", "attempts", "consecutive_failures", "pointers"}
    )

    incident_version: int = INCIDENT_VERSION
    #: RFC 3339 UTC with milliseconds and ``Z``
    recorded_at: str
    pipeline: str
    #: the demand source that fired the run (cron, after, freshness, webhook)
    source: str
    outcome: str
    logical_ts: str | None
    submission_id: str
    exit_code: int | None
    attempts: int | None
    consecutive_failures: int | None
    pointers: list[IncidentPointer] = Field(default_factory=list)
