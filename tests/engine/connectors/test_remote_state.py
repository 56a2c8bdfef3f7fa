"""Connectors on a remote state backend: the batch claim holds across machines (two projects with their own
local state files sharing one valkey), and the saved state travels through the backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.connectors.kit import ConnectorProject
from tests.fixtures.processes import wait_for
from tests.fixtures.redis import RedisServer


def machine(root: Path, redis: RedisServer, prefix: str, mode: str, *args: str) -> ConnectorProject:
    root.mkdir()
    state = f'[state]\nbackend = "valkey"\nvalkey_url = "{redis.url}"\nvalkey_prefix = "{prefix}"\n'
    return ConnectorProject(root).setup(mode, *args, extra=state)


@pytest.mark.services
@pytest.mark.slow
def test_claim_and_state_are_shared_through_the_backend(
    tmp_path: Path, redis_server: RedisServer, redis_prefix: str
) -> None:
    a = machine(tmp_path / "a", redis_server, redis_prefix, "wait_then_ok",
                f"marker={tmp_path / 'marker'}", f"go={tmp_path / 'go'}")
    b = machine(tmp_path / "b", redis_server, redis_prefix, "ok")
    first = a.popen()
    wait_for((tmp_path / "marker").exists, what="machine a's program to start")

    # machine b has a state file of its own, but the claim lives on the backend: it skips
    skipped = b.load()
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.connector["status"] == "skipped"

    (tmp_path / "go").touch()
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert json.loads(out)["connector"]["commit_seq_after"] == 1

    # machine b now downloads commit_seq 1 and the cursor machine a saved
    second = b.load()
    assert second.returncode == 0, second.stderr
    assert second.connector["commit_seq_before"] == 1 and second.connector["commit_seq_after"] == 2
    assert b.rows("SELECT min(id), max(id) FROM wh.raw.events") == [(3, 5)]
    state = b.state()
    assert state is not None and json.loads(state["value"]) == {"cursor": 6}
