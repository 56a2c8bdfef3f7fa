"""A run that finds the state store locked by a run racing the same idempotency key waits to see the
holder's claim, and reports the skip it would have got (rocky_engine.run.idempotency.peek_while_locked)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.config.sections import IdempotencyConfig
from rocky_engine.run import idempotency
from rocky_engine.state.store import StateStore


def _now() -> datetime:
    return datetime.now(UTC)


def test_a_claim_made_while_the_racer_waits_is_reported_as_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    looked = threading.Event()
    real_open = StateStore.open

    def open_spy(*args: Any, **kwargs: Any) -> StateStore:
        if kwargs.get("writer") is False:
            looked.set()  # the racer has read the store once and found no entry: it is waiting now
        return real_open(*args, **kwargs)

    with StateStore.open(path, writer=True) as holder:
        monkeypatch.setattr(StateStore, "open", staticmethod(open_spy))

        def claim_late() -> None:
            assert looked.wait(30)  # the holder is slow to claim (a cold interpreter, a busy disk)
            idempotency.claim(
                holder.idempotency, "nightly", "run-20261130-000000-000", IdempotencyConfig(), _now()
            )

        late = threading.Thread(target=claim_late)
        late.start()
        try:
            seen = idempotency.peek_while_locked(path, "nightly", IdempotencyConfig(), _now, wait_seconds=60)
        finally:
            late.join()
    assert seen is not None
    assert (seen.skip_status, seen.skipped_by_run_id) == ("SkippedInFlight", "run-20261130-000000-000")


def test_no_claim_within_the_wait_means_the_lock_error_stands(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path, writer=True):
        t0 = time.monotonic()
        seen = idempotency.peek_while_locked(path, "nightly", IdempotencyConfig(), _now, wait_seconds=0.3)
        waited = time.monotonic() - t0
    assert seen is None
    assert waited >= 0.3

