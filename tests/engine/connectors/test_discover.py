"""``rocky discover`` reports each connector target as a source whose ``last_sync_at`` is its last commit."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.engine.connectors.kit import ConnectorProject


@pytest.mark.slow
def test_connector_sources_in_discover(cp: ConnectorProject) -> None:
    cp.setup("ok")
    before = cp.cli("discover")
    assert before.returncode == 0, before.stderr
    (source,) = before.json["sources"]
    assert source == {
        "id": "connector:fake",
        "components": {"connector": "fake"},
        "source_type": "connector",
        "last_sync_at": None,
        "tables": [{"name": "events"}],
        "metadata": {"target": "wh.raw.events", "adapter": "default", "commit_seq": 0},
    }
    assert not cp.state_path.exists()  # discover never creates the store

    assert cp.load().returncode == 0
    after = cp.cli("discover").json["sources"][0]
    state = cp.state()
    assert state is not None
    assert after["last_sync_at"].endswith("Z")
    synced = datetime.fromisoformat(after["last_sync_at"].replace("Z", "+00:00"))
    committed = datetime.fromisoformat(state["committed_at"].replace("Z", "+00:00"))
    assert abs((synced - committed).total_seconds()) < 0.001
    assert after["metadata"]["commit_seq"] == 1

    # a failed run commits nothing, so last_sync_at does not move
    cp.setup("fail_then_ok", f"marker={cp.marker}")
    assert cp.load().returncode == 1
    assert cp.cli("discover").json["sources"][0]["last_sync_at"] == after["last_sync_at"]
