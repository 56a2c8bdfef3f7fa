"""Claims across machines on the real servers: idempotency keys (CONTRACT section 3 decision table) and
the generic leases connector claims use."""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.state._time import to_db, to_db_opt
from rocky_engine.state.remote import RemoteClaims, RemoteIdempotency, RemoteLayout, open_backend
from rocky_engine.state.remote.backend import RemoteBackend
from rocky_engine.state.store import StateStore
from tests.engine.state.remote.conftest import Remote
from tests.engine.state.test_idempotency_decision import TABLE

pytestmark = pytest.mark.services

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["s3", "valkey", "tiered"])
def backend(request: pytest.FixtureRequest) -> Iterator[RemoteBackend]:
    remote: Remote = request.getfixturevalue(f"{request.param}_remote")
    opened = open_backend(remote.config())
    assert opened is not None
    yield opened
    opened.close()


def _machine(tmp_path: Path, name: str, backend: RemoteBackend) -> tuple[StateStore, RemoteIdempotency]:
    store = StateStore.open(tmp_path / name / "state.db")
    repo = RemoteIdempotency(
        store.idempotency, backend, RemoteLayout(), retention_days=30, timeout_seconds=30
    )
    return store, repo


def test_key_race_across_two_machines_exactly_one_proceeds(backend: RemoteBackend, tmp_path: Path) -> None:
    store_a, repo_a = _machine(tmp_path, "a", backend)
    store_b, repo_b = _machine(tmp_path, "b", backend)
    try:
        attempts = [(repo_a if i % 2 else repo_b, f"run-{i}") for i in range(8)]
        with cf.ThreadPoolExecutor(8) as pool:
            decisions = list(pool.map(lambda a: a[0].claim("k1", a[1], now=NOW, ttl_hours=24), attempts))
        winners = [run for (_, run), d in zip(attempts, decisions, strict=True) if d.proceed]
        assert len(winners) == 1
        losers = [d for d in decisions if not d.proceed]
        assert {d.outcome for d in losers} == {"skipped_in_flight"}
        assert {d.skipped_by_run_id for d in losers} == set(winners)
        # Both machines' local tables mirror the remote entry.
        for store in (store_a, store_b):
            entry = store.idempotency.get("k1")
            assert entry is not None and entry.run_id == winners[0] and entry.state == "in_flight"
    finally:
        store_a.close()
        store_b.close()


def test_decision_table_on_the_remote_entry(backend: RemoteBackend, tmp_path: Path) -> None:
    store_a, a = _machine(tmp_path, "a", backend)
    store_b, b = _machine(tmp_path, "b", backend)
    try:
        assert a.claim("k", "run-1", now=NOW, ttl_hours=1).outcome == "claimed"
        assert a.finalize("k", "run-1", succeeded=True, now=NOW)
        done = b.claim("k", "run-2", now=NOW, ttl_hours=1)
        assert (done.proceed, done.outcome, done.skipped_by_run_id) == (False, "skipped_idempotent", "run-1")

        assert a.claim("f", "run-3", now=NOW, ttl_hours=1).proceed
        assert a.finalize("f", "run-3", succeeded=False, now=NOW)
        any_mode = b.claim("f", "run-4", now=NOW, ttl_hours=1, dedup_on="any")
        assert (any_mode.proceed, any_mode.outcome) == (False, "skipped_idempotent")
        retry = b.claim("f", "run-4", now=NOW, ttl_hours=1)
        assert (retry.proceed, retry.outcome, retry.previous_run_id) == (True, "reclaimed", "run-3")

        assert a.claim("e", "run-5", now=NOW, ttl_hours=1).proceed
        late = NOW + timedelta(hours=2)
        adopted = b.claim("e", "run-6", now=late, ttl_hours=1)
        assert (adopted.proceed, adopted.adopted, adopted.previous_run_id) == (True, True, "run-5")
        # The adopted run's late finalize changes nothing; the adopter's does.
        assert not a.finalize("e", "run-5", succeeded=True, now=late)
        assert b.finalize("e", "run-6", succeeded=True, now=late)
        entry = store_b.idempotency.get("e")
        assert entry is not None and (entry.state, entry.run_id) == ("succeeded", "run-6")
    finally:
        store_a.close()
        store_b.close()


def test_the_remote_claim_follows_the_decision_table(backend: RemoteBackend, tmp_path: Path) -> None:
    """Every row of CONTRACT section 3's table, asked about an entry stored on the backend."""
    store, repo = _machine(tmp_path, "a", backend)
    try:
        for name, row in TABLE.items():
            key = f"table-{name}"
            if row.entry is not None:
                e = row.entry
                doc = {"state": e.state, "run_id": e.run_id, "claimed_at": to_db(e.claimed_at),
                       "expires_at": to_db(e.expires_at), "finished_at": to_db_opt(e.finished_at)}
                backend.put(RemoteLayout().idempotency(key), json.dumps(doc).encode(), expect=None)
            decision = repo.claim(key, "run-new", now=row.now, ttl_hours=2, dedup_on=row.dedup_on)
            assert decision == row.expected, name
            mirrored = store.idempotency.get(key)
            assert mirrored is not None, name
            assert mirrored.run_id == ("run-new" if row.expected.proceed else "run-20260301-120000-000"), name
    finally:
        store.close()


def test_leases(backend: RemoteBackend) -> None:
    clock = [1000.0]
    claims = RemoteClaims(backend, RemoteLayout(), clock=lambda: clock[0])
    assert claims.remote_get("connector:pg:7") is None
    assert claims.remote_claim("connector:pg:7", "run-a", ttl=60)
    assert not claims.remote_claim("connector:pg:7", "run-b", ttl=60)
    assert claims.remote_claim("connector:pg:7", "run-a", ttl=60), "the holder may extend its own lease"
    assert claims.remote_get("connector:pg:7") == "run-a"
    assert not claims.remote_release("connector:pg:7", "run-b")
    assert claims.remote_get("connector:pg:7") == "run-a"
    assert claims.remote_release("connector:pg:7", "run-a")
    assert claims.remote_get("connector:pg:7") is None

    assert claims.remote_claim("connector:pg:8", "run-a", ttl=60)
    clock[0] += 61  # run-a's lease expired (S3 keeps the object; valkey may have dropped it already)
    assert claims.remote_get("connector:pg:8") is None
    assert claims.remote_claim("connector:pg:8", "run-b", ttl=60)
    assert claims.remote_get("connector:pg:8") == "run-b"
    assert claims.remote_release("connector:pg:8")


def test_lease_race_exactly_one_holder(backend: RemoteBackend) -> None:
    claims = RemoteClaims(backend, RemoteLayout())
    with cf.ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: claims.remote_claim("race", f"holder-{i}", ttl=60), range(8)))
    assert won.count(True) == 1
