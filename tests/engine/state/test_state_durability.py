"""A committed state write (connector state and its fence, claims, watermarks) survives a power cut:
the writer's SQLite connection syncs every commit (WAL + ``synchronous=FULL``), as the connection
itself reports."""

from __future__ import annotations

from pathlib import Path

from rocky_engine.state import StateStore
from rocky_engine.state.connectors import ConnectorStateRepo
from tests.engine.schedule.kit import T0


def test_connector_state_commit_is_synced(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path, writer=True) as store:
        # FULL (2): SQLite fsyncs the WAL on every commit; NORMAL would lose the last commits on power loss
        assert store.query("PRAGMA synchronous")[0][0] == 2
        assert store.query("PRAGMA journal_mode")[0][0] == "wal"
        seq = ConnectorStateRepo(store).commit(
            "orders", expected_seq=0, schema_version=1, value_json='{"cursor": 3}', run_id="r1", now=T0
        )
    assert seq == 1
    with StateStore.open(path, writer=False) as store:
        state = ConnectorStateRepo(store).get("orders")
        assert state is not None and state.commit_seq == 1
