"""Idempotency claims: every branch of CONTRACT section 3, expiry, dedup_on, finalize, prune, races."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.state import StateStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(tmp_path / "state.db") as s:
        yield s


def test_no_entry_claims_in_flight_and_proceeds(store: StateStore) -> None:
    decision = store.idempotency.claim("k", "run-a", now=T0, ttl_hours=24)
    assert decision.proceed and decision.outcome == "claimed"
    assert decision.skip_status is None and not decision.adopted
    entry = store.idempotency.get("k")
    assert entry is not None
    assert (entry.state, entry.run_id, entry.claimed_at) == ("in_flight", "run-a", T0)
    assert entry.expires_at == T0 + timedelta(hours=24)
    assert entry.finished_at is None


def test_live_in_flight_skips(store: StateStore) -> None:
    store.idempotency.claim("k", "run-a", now=T0, ttl_hours=24)
    for dedup_on in ("success", "any"):
        decision = store.idempotency.claim(
            "k", "run-b", now=T0 + timedelta(hours=23, minutes=59), ttl_hours=24, dedup_on=dedup_on
        )
        assert not decision.proceed
        assert decision.outcome == "skipped_in_flight"
        assert decision.skip_status == "SkippedInFlight"
        assert decision.skipped_by_run_id == "run-a"
    entry = store.idempotency.get("k")
    assert entry is not None and entry.run_id == "run-a"


def test_expired_in_flight_is_adopted(store: StateStore) -> None:
    store.idempotency.claim("k", "run-a", now=T0, ttl_hours=1)
    later = T0 + timedelta(hours=1)  # expiry is inclusive: at expires_at the claim is dead
    decision = store.idempotency.claim("k", "run-b", now=later, ttl_hours=1)
    assert decision.proceed and decision.adopted
    assert decision.outcome == "adopted"
    assert decision.previous_run_id == "run-a"
    entry = store.idempotency.get("k")
    assert entry is not None
    assert (entry.state, entry.run_id, entry.claimed_at) == ("in_flight", "run-b", later)
    assert entry.expires_at == later + timedelta(hours=1)


def test_succeeded_skips_under_both_policies(store: StateStore) -> None:
    store.idempotency.claim("k", "run-a", now=T0, ttl_hours=24)
    assert store.idempotency.finalize("k", "run-a", succeeded=True, now=T0 + timedelta(minutes=5))
    for dedup_on in ("success", "any"):
        decision = store.idempotency.claim(
            "k", "run-b", now=T0 + timedelta(days=3), ttl_hours=24, dedup_on=dedup_on
        )
        assert not decision.proceed
        assert decision.skip_status == "SkippedIdempotent"
        assert decision.skipped_by_run_id == "run-a"


def test_failed_proceeds_under_success(store: StateStore) -> None:
    store.idempotency.claim("k", "run-a", now=T0, ttl_hours=24)
    store.idempotency.finalize("k", "run-a", succeeded=False, now=T0)
    decision = store.idempotency.claim("k", "run-b", now=T0 + timedelta(minutes=1), ttl_hours=24)
    assert decision.proceed and decision.outcome == "reclaimed"
    assert decision.previous_run_id == "run-a" and not decision.adopted
    entry = store.idempotency.get("k")
    assert entry is not None
    assert (entry.state, entry.run_id, entry.finished_at) == ("in_flight", "run-b", None)


def test_failed_skips_under_any(store: StateStore) -> None:
    store.idempotency.claim("k", "run-a", now=T0, ttl_hours=24)
    store.idempotency.finalize("k", "run-a", succeeded=False, now=T0)
    decision = store.idempotency.claim("k", "run-b", now=T0, ttl_hours=24, dedup_on="any")
    assert not decision.proceed
    assert decision.skip_status == "SkippedIdempotent"
    assert decision.skipped_by_run_id == "run-a"


def test_finalize_only_touches_the_holders_claim(store: StateStore) -> None:
    store.idempotency.claim("k", "run-a", now=T0, ttl_hours=1)
    store.idempotency.claim("k", "run-b", now=T0 + timedelta(hours=2), ttl_hours=1)  # adopts
    # the original run finally finishes: it no longer holds the key
    assert not store.idempotency.finalize("k", "run-a", succeeded=True, now=T0 + timedelta(hours=3))
    entry = store.idempotency.get("k")
    assert entry is not None and (entry.state, entry.run_id) == ("in_flight", "run-b")
    assert store.idempotency.finalize("k", "run-b", succeeded=True, now=T0 + timedelta(hours=3))
    assert store.idempotency.finalize("k", "run-b", succeeded=True, now=T0 + timedelta(hours=3))  # twice: ok
    assert not store.idempotency.finalize("missing", "run-b", succeeded=True, now=T0)


def test_keys_are_independent(store: StateStore) -> None:
    assert store.idempotency.claim("k1", "run-a", now=T0, ttl_hours=1).proceed
    assert store.idempotency.claim("k2", "run-b", now=T0, ttl_hours=1).proceed


def test_prune_forgets_old_finished_and_long_expired_keys(store: StateStore) -> None:
    repo = store.idempotency
    repo.claim("old-ok", "r1", now=T0, ttl_hours=24)
    repo.finalize("old-ok", "r1", succeeded=True, now=T0)
    repo.claim("old-failed", "r2", now=T0, ttl_hours=24)
    repo.finalize("old-failed", "r2", succeeded=False, now=T0)
    repo.claim("recent", "r3", now=T0 + timedelta(days=29), ttl_hours=24)
    repo.finalize("recent", "r3", succeeded=True, now=T0 + timedelta(days=29))
    repo.claim("stuck", "r4", now=T0 - timedelta(days=2), ttl_hours=24)
    repo.claim("live", "r5", now=T0 + timedelta(days=30), ttl_hours=24)
    removed = repo.prune(retention_days=30, now=T0 + timedelta(days=30, hours=1))
    assert removed == 3
    assert repo.get("old-ok") is None and repo.get("old-failed") is None and repo.get("stuck") is None
    assert repo.get("recent") is not None and repo.get("live") is not None
    # a pruned key can run again
    assert repo.claim("old-ok", "r6", now=T0 + timedelta(days=31), ttl_hours=24).outcome == "claimed"


def test_bad_arguments_are_rejected(store: StateStore) -> None:
    with pytest.raises(ValueError, match="dedup_on"):
        store.idempotency.claim("k", "r", now=T0, ttl_hours=1, dedup_on="never")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttl_hours"):
        store.idempotency.claim("k", "r", now=T0, ttl_hours=0)


def test_claim_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path) as store:
        store.idempotency.claim("k", "run-a", now=T0, ttl_hours=24)
    with StateStore.open(path) as store:
        assert store.idempotency.claim("k", "run-b", now=T0, ttl_hours=24).outcome == "skipped_in_flight"


RACER = textwrap.dedent(
    """
    import json, sys, time
    from datetime import datetime, UTC
    from pathlib import Path
    from rocky_engine.errors import StateLockedError
    from rocky_engine.state import StateStore
    path, go, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    deadline = time.monotonic() + 30
    while True:
        try:
            store = StateStore.open(path)
            break
        except StateLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)
    try:
        d = store.idempotency.claim("race-key", name, now=datetime(2026, 3, 1, tzinfo=UTC), ttl_hours=24)
    finally:
        store.close()
    print(json.dumps({"name": name, "outcome": d.outcome, "by": d.skipped_by_run_id}), flush=True)
    # stay alive, as a run holding its claim does: a holder that has exited is adopted (provably dead)
    while not Path(str(go) + ".done").exists():
        time.sleep(0.01)
    """
)


def test_processes_racing_for_one_key_let_exactly_one_proceed(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore.open(path).close()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(path), str(go), f"run-{i}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(4)
    ]
    for proc in procs:  # every racer has imported and waits at the start line
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    go.touch()
    results = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            results.append(json.loads(proc.stdout.readline()))
    finally:
        (tmp_path / "go.done").touch()  # every racer may exit now
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    winners = [r for r in results if r["outcome"] == "claimed"]
    assert len(winners) == 1
    losers = [r for r in results if r["outcome"] != "claimed"]
    assert {r["outcome"] for r in losers} == {"skipped_in_flight"}
    assert {r["by"] for r in losers} == {winners[0]["name"]}
