"""The claim state machine around one scheduled child, and the stuck-claim resolver.

A claim is written ``submitted`` (in the same transaction that advances the cron anchor) before the child
starts, and finalized ``completed{outcome}`` after it. A reconciler that dies in between leaves it
``submitted``; whoever meets it next resolves it:

1. a child still alive (``.rocky/running/<submission_id>.json`` names a live pid whose environment
   carries that submission id) keeps the claim in flight, however long it runs;
2. else the child's run record (matched by ``submission_id``) decides the outcome: the run is honoured;
3. else, once the claim is ``RESOLVE_AFTER`` (5 minutes) old, it is finalized as a failure and never
   retried (the documented at-most-once loss window).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.state._time import rfc3339, to_db
from rocky_engine.state.schedule import ScheduleRow
from rocky_engine.state.schedule_claims import Claim, Outcome
from rocky_engine.wire.schedule import RunningChild

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

RESOLVE_AFTER = timedelta(minutes=5)
RUNNING_DIR = "running"


def claim_key(pipeline: str, source: str, instant: datetime) -> str:
    """The key of declared demand: ``<pipeline>|<source>|<instant>`` (the occurrence for cron, the tick
    instant for after/freshness)."""
    return f"{pipeline}|{source}|{to_db(instant)}"


def webhook_claim_key(demand_uid: str) -> str:
    return f"webhook|{demand_uid}"


def outcome_of_exit(code: int) -> Outcome:
    """0 = success, 2 = partial, anything else = failure (CONTRACT section 6)."""
    if code == 0:
        return "success"
    if code == 2:
        return "partial"
    return "failure"


def outcome_of_status(status: str) -> Outcome:
    """The outcome a run record's status stands for."""
    if status == "Success":
        return "success"
    if status == "PartialFailure":
        return "partial"
    return "failure"


def row_after_outcome(
    row: ScheduleRow, outcome: Outcome, attempt_at: datetime, submission_id: str
) -> ScheduleRow:
    """The cursor after a finalized run: the failure streak and what the backoff reads."""
    streak = 0 if outcome == "success" else row.consecutive_failures + 1
    return row.with_(
        consecutive_failures=streak,
        last_attempt_at=attempt_at,
        last_outcome=outcome,
        last_submission_id=submission_id,
    )


# ---------------------------------------------------------------------- live children


class ChildRegistry:
    """``.rocky/running/<submission_id>.json``: which pid runs which submission, for crash recovery."""

    def __init__(self, dot_rocky: Path) -> None:
        self.directory = dot_rocky / RUNNING_DIR

    def _path(self, submission_id: str) -> Path:
        return self.directory / f"{submission_id}.json"

    def register(self, submission_id: str, pid: int, pipeline: str, now: datetime) -> None:
        doc = RunningChild(pid=pid, hostname=socket.gethostname(), pipeline=pipeline, started_at=rfc3339(now))
        with contextlib.suppress(OSError):
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f".{submission_id}.tmp"
            tmp.write_text(json.dumps(doc.wire()), encoding="utf-8")
            os.replace(tmp, self._path(submission_id))

    def forget(self, submission_id: str) -> None:
        with contextlib.suppress(OSError):
            self._path(submission_id).unlink()

    def alive(self, submission_id: str) -> bool:
        """True when the registered child of this submission is still running on this host."""
        try:
            child = RunningChild.model_validate_json(self._path(submission_id).read_bytes())
        except (OSError, ValueError):
            return False
        if child.hostname != socket.gethostname():
            return False
        return pid_runs_submission(child.pid, submission_id)


def pid_runs_submission(pid: int, submission_id: str) -> bool:
    """``pid`` is alive and (where /proc tells) carries ``ROCKY_SUBMISSION_ID=<submission_id>``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    if not Path("/proc/self").exists():
        return True  # no /proc: a live pid is the best evidence available
    proc = Path(f"/proc/{pid}")
    try:
        stat = (proc / "stat").read_text()
        # An orphan that exited stays a zombie until its new parent reaps it (some init never does).
        if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
            return False
        environ = (proc / "environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return True  # not ours to read
    return f"ROCKY_SUBMISSION_ID={submission_id}".encode() in environ.split(b"\0")


# ---------------------------------------------------------------------- resolver


@dataclass(frozen=True)
class Resolution:
    """A submitted claim's outcome, recovered without its owner."""

    claim: Claim
    outcome: Outcome
    #: the child's run, when it recorded one
    run_id: str | None
    #: when the outcome happened (the run's finish, else the resolution instant)
    finished_at: datetime


def resolve_claim(
    store: StateStore,
    claim: Claim,
    now: datetime,
    *,
    registry: ChildRegistry,
    resolve_after: timedelta = RESOLVE_AFTER,
) -> Resolution | None:
    """Decide a ``submitted`` claim left by an earlier tick; None while it is still in flight."""
    if registry.alive(claim.submission_id):
        return None
    rows = store.query(
        "SELECT run_id, status, finished_at, started_at FROM run_history WHERE submission_id = ? "
        "ORDER BY started_at DESC LIMIT 1",
        (claim.submission_id,),
    )
    if rows:
        from rocky_engine.state._time import from_db

        row = rows[0]
        with store.decoding():
            finished = from_db(row["finished_at"] or row["started_at"])
        return Resolution(claim, outcome_of_status(str(row["status"])), str(row["run_id"]), finished)
    if now - claim.updated_at >= resolve_after:
        return Resolution(claim, "failure", None, now)
    return None
