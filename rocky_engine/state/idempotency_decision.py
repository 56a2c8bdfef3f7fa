"""What a run does with its idempotency key (CONTRACT section 3 "Idempotency"): one pure function.

=====================  ===================  ==================================
entry                  dedup_on = success   dedup_on = any
=====================  ===================  ==================================
none                   claim, proceed       claim, proceed
succeeded              skip (Idempotent)    skip (Idempotent)
failed                 re-claim, proceed    skip (Idempotent)
in_flight, live        skip (InFlight)      skip (InFlight)
in_flight, expired     adopt, proceed       adopt, proceed
in_flight, holder dead adopt, proceed       adopt, proceed
=====================  ===================  ==================================

"Holder dead": the claim names its holder (host, pid, process start time) and the caller, holding the
store's writer lock, proved that process gone on this host (``holder_dead``; ``process.identity``): a run
killed with ``kill -9`` does not block its key for the TTL. A caller that cannot prove it (a run racing
the lock holder) passes no predicate and the claim holds until it expires.

:func:`decide` is the table. The local store (``state.idempotency``, inside its claim transaction), the
remote store (``state.remote.claims``, before its conditional write) and a run racing the lock holder
(``run.idempotency.peek_while_locked``, on a read-only copy) all ask it; they differ only in how they read
the entry and write the claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from rocky_engine.state._time import utc

DedupOn = Literal["success", "any"]
ClaimOutcome = Literal["claimed", "reclaimed", "adopted", "skipped_idempotent", "skipped_in_flight"]
SkipStatus = Literal["SkippedIdempotent", "SkippedInFlight"]

IN_FLIGHT = "in_flight"
SUCCEEDED = "succeeded"
FAILED = "failed"


@dataclass(frozen=True)
class IdempotencyEntry:
    """One stored key."""

    key: str
    state: str
    run_id: str
    claimed_at: datetime
    expires_at: datetime
    finished_at: datetime | None
    #: who holds an in-flight claim (``process.identity.Holder.encode``); None in claims written before
    holder: str | None = None


@dataclass(frozen=True)
class ClaimDecision:
    """What a run does with its idempotency key."""

    proceed: bool
    outcome: ClaimOutcome
    #: The run that holds (or held) the key when this run skips.
    skipped_by_run_id: str | None = None
    #: True when an expired in-flight claim was taken over (log a warning: its run may have died midway).
    adopted: bool = False
    #: The run whose failed or expired claim this run took over.
    previous_run_id: str | None = None
    #: The in-flight claim was taken over before it expired: its holder is provably dead.
    holder_dead: bool = False

    @property
    def skip_status(self) -> SkipStatus | None:
        """The run status of a skip (``SkippedIdempotent`` / ``SkippedInFlight``), ``None`` to proceed."""
        if self.outcome == "skipped_idempotent":
            return "SkippedIdempotent"
        if self.outcome == "skipped_in_flight":
            return "SkippedInFlight"
        return None


def decide(
    entry: IdempotencyEntry | None,
    dedup_on: DedupOn,
    now: datetime,
    *,
    holder_dead: Callable[[str | None], bool] | None = None,
) -> ClaimDecision:
    """The table above for the key's current ``entry`` (None: no entry) at ``now``.

    An in-flight claim is live while ``now`` is before its ``expires_at`` and ``holder_dead`` (when
    given) does not prove its holder gone; otherwise it is adopted. Any other state (one a newer engine
    may write) is claimed again.

    Raises:
        ValueError: ``dedup_on`` is neither ``"success"`` nor ``"any"``.
    """
    if dedup_on not in ("success", "any"):
        raise ValueError(f"dedup_on must be 'success' or 'any', not {dedup_on!r}")
    if entry is None:
        return ClaimDecision(proceed=True, outcome="claimed")
    holder = entry.run_id
    if entry.state == SUCCEEDED or (entry.state == FAILED and dedup_on == "any"):
        return ClaimDecision(proceed=False, outcome="skipped_idempotent", skipped_by_run_id=holder)
    if entry.state == IN_FLIGHT:
        if utc(now) >= utc(entry.expires_at):
            return ClaimDecision(proceed=True, outcome="adopted", adopted=True, previous_run_id=holder)
        if holder_dead is not None and holder_dead(entry.holder):
            return ClaimDecision(proceed=True, outcome="adopted", adopted=True, previous_run_id=holder,
                                 holder_dead=True)
        return ClaimDecision(proceed=False, outcome="skipped_in_flight", skipped_by_run_id=holder)
    return ClaimDecision(proceed=True, outcome="reclaimed", previous_run_id=holder)
