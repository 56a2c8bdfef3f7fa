"""The order of ``execute_run``'s steps is behaviour (CONTRACT section 3): a skip records nothing and fires
no hook; the key is finalized on every exit path; only a run that recorded itself uploads; completion hooks
fire after the store is closed (so a hook may run rocky itself). Real DuckDB, real state files, a real
Valkey for the upload."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rocky_engine.project import load_project
from rocky_engine.run.options import RunOptions
from rocky_engine.run.output import RunOutput
from rocky_engine.run.runner import execute_run
from rocky_engine.state.store import StateStore, try_writer_lock
from tests.engine.state.remote.conftest import Machine, Remote
from tests.fixtures.projects import TRANSFORMATION_TOML
from tests.fixtures.redis import RedisServer

if TYPE_CHECKING:
    from conftest import WarehouseProject


class ProbingSink:
    """Records each event with whether the store's writer lock was held when it fired."""

    def __init__(self, store: Path, fail_on: str | None = None) -> None:
        self.store = store
        self.fail_on = fail_on
        self.events: list[tuple[str, bool]] = []

    def fire(self, event: str, **_: Any) -> None:
        fd = try_writer_lock(self.store)
        if fd is not None:
            os.close(fd)
        self.events.append((event, fd is None))
        if event == self.fail_on:
            raise RuntimeError(f"the sink broke on {event}")


def run(config: Path, sink: ProbingSink, **options: Any) -> RunOutput:
    return execute_run(load_project(config, env=dict(os.environ)), RunOptions(**options), events=sink)


@pytest.fixture
def project(wp: WarehouseProject) -> WarehouseProject:
    wp.write_config(TRANSFORMATION_TOML.format(pipeline="models"))
    wp.model("good", "SELECT 1 AS x")
    return wp


def test_run_events_fire_under_the_lock_and_completion_after_the_store_is_closed(
    project: WarehouseProject,
) -> None:
    sink = ProbingSink(project.state_path)
    out = run(project.config, sink)
    assert out.status == "Success"
    assert sink.events == [
        ("pipeline_start", True), ("compile_complete", True), ("before_model_run", True),
        ("after_model_run", True), ("pipeline_complete", False),
    ]


def test_a_skip_fires_no_hook_and_writes_no_record(project: WarehouseProject) -> None:
    first = run(project.config, ProbingSink(project.state_path), idempotency_key="k")
    sink = ProbingSink(project.state_path)
    second = run(project.config, sink, idempotency_key="k")
    assert (second.status, second.skipped_by_run_id) == ("SkippedIdempotent", first.run_id)
    assert sink.events == []
    assert [r.run_id for r in project.runs()] == [first.run_id]


def test_an_error_escaping_the_runner_still_finalizes_the_key(project: WarehouseProject) -> None:
    with pytest.raises(RuntimeError, match="the sink broke on pipeline_start"):
        run(project.config, ProbingSink(project.state_path, fail_on="pipeline_start"), idempotency_key="k")
    with StateStore.open(project.state_path, writer=False) as store:
        entry = store.idempotency.get("k")
    assert entry is not None and entry.state == "failed"  # free for a retry under dedup_on = "success"
    assert project.runs() == []


@pytest.mark.services
def test_only_a_run_that_recorded_itself_uploads(
    tmp_path: Path, redis_server: RedisServer, redis_prefix: str
) -> None:
    valkey_remote = Remote("valkey", redis=redis_server, redis_prefix=redis_prefix)
    machine = Machine(tmp_path)
    machine.write(valkey_remote.state_toml())
    machine.seed("2026-01-01 00:00:00")
    with pytest.raises(RuntimeError):
        run(machine.config, ProbingSink(machine.state_path, fail_on="pipeline_start"))
    assert valkey_remote.snapshot() is None
    sink = ProbingSink(machine.state_path)
    out = run(machine.config, sink)
    assert out.status == "Success" and valkey_remote.snapshot() is not None
    # state_synced fires once the upload landed, the store still held; the completion hooks after
    assert sink.events[-2:] == [("state_synced", True), ("pipeline_complete", False)]
