"""``rocky run --idempotency-key K`` (CONTRACT section 3 "Idempotency") around one run.

The claim is one transaction on the run's idempotency backend (the local store, or the remote backend of
a remote ``[state]``), taken right after the store opens and before any work; what it decides is the
table of ``state.idempotency_decision``. A skip exits 0 with ``skipped_by_run_id``, writes no run record
and fires no hooks. The claim is finalized on every exit path of a run that proceeded (succeeded only for
a ``Success`` that was not interrupted).

A second ``rocky run`` racing the same key cannot open the store as a writer while the first holds it;
instead of failing on the lock it reads the key (read-only, waiting briefly for the holder's claim to
commit), asks the same table, and reports the skip the claim would have produced. When the table says
proceed it fails with the lock error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rocky_engine.run.output import RunOutput
from rocky_engine.state.idempotency_decision import ClaimDecision, decide

if TYPE_CHECKING:
    from rocky_engine.config.sections import IdempotencyConfig
    from rocky_engine.state.idempotency import IdempotencyBackend

#: how long a racing run waits for the lock holder's claim to become visible. The holder claims right
#: after it opens the store, but on a loaded machine (a cold interpreter, a busy disk) that took over 2 s
#: in CI, and the racing run then failed on the lock instead of reporting the skip.
PEEK_WAIT_SECONDS = 10.0
_PEEK_INTERVAL = 0.05


def skipped_output(decision: ClaimDecision, key: str, pipeline_type: str | None) -> RunOutput:
    """The result of a run that did not start because its key was already handled or in flight."""
    out = RunOutput(
        status=decision.skip_status or "SkippedIdempotent",
        idempotency_key=key,
        skipped_by_run_id=decision.skipped_by_run_id,
        pipeline_type=pipeline_type,
    )
    out.execution.concurrency = 0
    return out


def claim(
    backend: IdempotencyBackend, key: str, run_id: str, cfg: IdempotencyConfig, now: datetime
) -> ClaimDecision:
    """Claim ``key`` for ``run_id`` on ``backend`` (one transaction); the decision says whether to run."""
    ttl = float(cfg.in_flight_ttl_hours)
    return backend.claim(key, run_id, now=now, ttl_hours=ttl, dedup_on=cfg.dedup_on)


def finalize(backend: IdempotencyBackend, key: str, run_id: str, succeeded: bool, now: datetime) -> None:
    """Close the claim as succeeded or failed (the runner's ``RunOutcome.succeeded`` says which)."""
    backend.finalize(key, run_id, succeeded, now)


def peek_while_locked(
    path: Path,
    key: str,
    cfg: IdempotencyConfig,
    clock: Callable[[], datetime],
    on_newer: Literal["refuse", "recreate"] = "refuse",
    *,
    wait_seconds: float = PEEK_WAIT_SECONDS,
) -> ClaimDecision | None:
    """The skip the key's entry calls for; None when the table says proceed (the caller reports the lock).

    No entry yet (the holder has not committed its claim) is waited for up to ``wait_seconds``.
    """
    from rocky_engine.state.store import StateStore

    deadline = time.monotonic() + wait_seconds
    while True:
        with StateStore.open(path, writer=False, on_newer=on_newer) as store:
            entry = store.idempotency.get(key)
        if entry is not None:
            decision = decide(entry, cfg.dedup_on, clock())
            return None if decision.proceed else decision
        if time.monotonic() >= deadline:
            return None
        time.sleep(_PEEK_INTERVAL)
