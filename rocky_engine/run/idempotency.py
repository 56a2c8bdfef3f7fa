"""``rocky run --idempotency-key K`` (CONTRACT section 3 "Idempotency") around one run.

The claim is one state-store transaction taken right after the store opens, before any work:

- no entry: claim it in flight and run; an in-flight claim past ``in_flight_ttl_hours``: adopt it and run;
- succeeded (or failed under ``dedup_on = "any"``): skip, ``SkippedIdempotent``;
- in flight and not expired: skip, ``SkippedInFlight``;
- failed under ``dedup_on = "success"`` (the default): claim it again and run.

A skip exits 0 with ``skipped_by_run_id``, writes no run record and fires no hooks. The claim is finalized
on every exit path of a run that proceeded (succeeded only for a ``Success`` that was not interrupted).

A second ``rocky run`` racing the same key cannot open the store as a writer while the first holds it;
instead of failing on the lock it reads the key (read-only, waiting briefly for the holder's claim to
commit) and reports the same skip the claim would have. Without an entry it fails with the lock error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rocky_engine.run.output import RunOutput
from rocky_engine.state._time import utc

if TYPE_CHECKING:
    from rocky_engine.config.sections import IdempotencyConfig
    from rocky_engine.state.idempotency import ClaimDecision
    from rocky_engine.state.store import StateStore

#: how long a racing run waits for the lock holder's claim to become visible. The holder claims right
#: after it opens the store, but on a loaded machine (a cold interpreter, a busy disk) that took over 2 s
#: in CI, and the racing run then failed on the lock instead of reporting the skip.
PEEK_WAIT_SECONDS = 10.0
_PEEK_INTERVAL = 0.05


def skipped_output(status: str, key: str, holder: str | None, pipeline_type: str | None) -> RunOutput:
    """The result of a run that did not start because its key was already handled or in flight."""
    out = RunOutput(
        status="SkippedIdempotent" if status == "SkippedIdempotent" else "SkippedInFlight",
        idempotency_key=key,
        skipped_by_run_id=holder,
        pipeline_type=pipeline_type,
    )
    out.execution.concurrency = 0
    return out


def claim(store: StateStore, key: str, run_id: str, cfg: IdempotencyConfig, now: datetime) -> ClaimDecision:
    """Claim ``key`` for ``run_id`` (one transaction); the decision says whether to run."""
    return store.idempotency.claim(
        key, run_id, now=now, ttl_hours=float(cfg.in_flight_ttl_hours), dedup_on=cfg.dedup_on
    )


def finalize(store: StateStore, key: str, run_id: str, out: RunOutput | None, now: datetime) -> None:
    """Close the claim: succeeded for an uninterrupted ``Success``, failed otherwise (or on an exception)."""
    succeeded = out is not None and out.status == "Success" and not out.interrupted
    store.idempotency.finalize(key, run_id, succeeded, now)


def peek_while_locked(
    path: Path,
    key: str,
    cfg: IdempotencyConfig,
    clock: Callable[[], datetime],
    on_newer: Literal["refuse", "recreate"] = "refuse",
    *,
    wait_seconds: float = PEEK_WAIT_SECONDS,
) -> tuple[str, str] | None:
    """``(skip status, holder run id)`` when the key says skip; None when it does not (or has no entry)."""
    from rocky_engine.state.store import StateStore

    deadline = time.monotonic() + wait_seconds
    while True:
        with StateStore.open(path, writer=False, on_newer=on_newer) as store:
            entry = store.idempotency.get(key)
        if entry is not None:
            if entry.state == "succeeded" or (entry.state == "failed" and cfg.dedup_on == "any"):
                return "SkippedIdempotent", entry.run_id
            if entry.state == "in_flight" and utc(clock()) < entry.expires_at:
                return "SkippedInFlight", entry.run_id
            return None
        if time.monotonic() >= deadline:
            return None
        time.sleep(_PEEK_INTERVAL)
