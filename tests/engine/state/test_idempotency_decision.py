"""The idempotency decision table (CONTRACT section 3) as one pure function, row by row, and the callers
that must agree with it: the local store's claim and the read-only peek of a run racing the lock holder
(the remote store's claim is checked against the same rows in tests/engine/state/remote/test_claims.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import pytest

from rocky_engine.config.sections import IdempotencyConfig
from rocky_engine.process.identity import this_process
from rocky_engine.run import idempotency
from rocky_engine.state.idempotency_decision import (
    ClaimDecision,
    DedupOn,
    IdempotencyEntry,
    decide,
)
from rocky_engine.state.store import StateStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EXPIRES = T0 + timedelta(hours=1)
HOLDER = "run-20260301-120000-000"


class Row(NamedTuple):
    entry: IdempotencyEntry | None
    dedup_on: DedupOn
    now: datetime
    expected: ClaimDecision


def held(state: str) -> IdempotencyEntry:
    return IdempotencyEntry(key="k", state=state, run_id=HOLDER, claimed_at=T0, expires_at=EXPIRES,
                            finished_at=None if state == "in_flight" else T0)


CLAIM = ClaimDecision(proceed=True, outcome="claimed")
IDEMPOTENT = ClaimDecision(proceed=False, outcome="skipped_idempotent", skipped_by_run_id=HOLDER)
IN_FLIGHT = ClaimDecision(proceed=False, outcome="skipped_in_flight", skipped_by_run_id=HOLDER)
RECLAIM = ClaimDecision(proceed=True, outcome="reclaimed", previous_run_id=HOLDER)
ADOPT = ClaimDecision(proceed=True, outcome="adopted", adopted=True, previous_run_id=HOLDER)

LIVE = EXPIRES - timedelta(microseconds=1)
LATE = EXPIRES + timedelta(days=3)

#: every row of the table, both dedup_on modes, and the edges of the in-flight TTL
TABLE: dict[str, Row] = {
    "none/success": Row(None, "success", T0, CLAIM),
    "none/any": Row(None, "any", T0, CLAIM),
    "succeeded/success": Row(held("succeeded"), "success", T0, IDEMPOTENT),
    "succeeded/any": Row(held("succeeded"), "any", LATE, IDEMPOTENT),
    "failed/success": Row(held("failed"), "success", T0, RECLAIM),
    "failed/any": Row(held("failed"), "any", T0, IDEMPOTENT),
    "in_flight-live/success": Row(held("in_flight"), "success", LIVE, IN_FLIGHT),
    "in_flight-live/any": Row(held("in_flight"), "any", T0, IN_FLIGHT),
    "in_flight-at-expiry/success": Row(held("in_flight"), "success", EXPIRES, ADOPT),
    "in_flight-expired/success": Row(held("in_flight"), "success", LATE, ADOPT),
    "in_flight-expired/any": Row(held("in_flight"), "any", LATE, ADOPT),
    "unknown-state/success": Row(held("paused"), "success", T0, RECLAIM),
    "unknown-state/any": Row(held("paused"), "any", T0, RECLAIM),
}


#: the rows the local table can hold (its schema allows the three known states only)
LOCAL = {name: row for name, row in TABLE.items() if not name.startswith("unknown")}


@pytest.mark.parametrize("row", TABLE.values(), ids=TABLE.keys())
def test_decision_table(row: Row) -> None:
    assert decide(row.entry, row.dedup_on, row.now) == row.expected


def test_skip_statuses() -> None:
    assert [d.skip_status for d in (CLAIM, IDEMPOTENT, IN_FLIGHT, RECLAIM, ADOPT)] == [
        None, "SkippedIdempotent", "SkippedInFlight", None, None
    ]


def test_a_naive_now_is_utc() -> None:
    assert decide(held("in_flight"), "success", LIVE.replace(tzinfo=None)) == IN_FLIGHT
    assert decide(held("in_flight"), "success", EXPIRES.replace(tzinfo=None)) == ADOPT


def test_an_unknown_dedup_on_is_refused() -> None:
    with pytest.raises(ValueError, match="dedup_on must be 'success' or 'any', not 'never'"):
        decide(None, "never", T0)  # type: ignore[arg-type]


@pytest.mark.parametrize("row", LOCAL.values(), ids=LOCAL.keys())
def test_the_local_claim_follows_the_table(tmp_path: Path, row: Row) -> None:
    with StateStore.open(tmp_path / "state.db") as store:
        if row.entry is not None:
            store.idempotency.put(row.entry)
        decision = store.idempotency.claim("k", "run-new", now=row.now, ttl_hours=2, dedup_on=row.dedup_on)
        after = store.idempotency.get("k")
    assert decision == row.expected
    if row.expected.proceed:
        assert after == IdempotencyEntry(key="k", state="in_flight", run_id="run-new", claimed_at=row.now,
                                         expires_at=row.now + timedelta(hours=2), finished_at=None,
                                         holder=this_process().encode())
    else:
        assert after == row.entry  # a skip leaves the entry as it was


@pytest.mark.parametrize("row", LOCAL.values(), ids=LOCAL.keys())
def test_the_peek_of_a_racing_run_follows_the_table(tmp_path: Path, row: Row) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path) as holder:  # the racing run cannot take the writer lock
        if row.entry is not None:
            holder.idempotency.put(row.entry)
        seen = idempotency.peek_while_locked(
            path, "k", IdempotencyConfig(dedup_on=row.dedup_on), lambda: row.now, wait_seconds=0
        )
    assert seen == (None if row.expected.proceed else row.expected)


def test_a_live_claim_whose_holder_is_proved_dead_is_adopted() -> None:
    live = held("in_flight")
    assert decide(live, "success", T0, holder_dead=lambda holder: True) == ClaimDecision(
        proceed=True, outcome="adopted", adopted=True, previous_run_id=HOLDER, holder_dead=True
    )
    assert not decide(live, "success", T0, holder_dead=lambda holder: False).proceed
    assert not decide(live, "success", T0).proceed  # no proof asked for (a run racing the lock holder)
