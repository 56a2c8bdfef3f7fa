"""A replication run takes every timestamp it records from the run's clock: progress, watermarks, check
history and the run record (see tests/engine/run/test_run_clock.py for the transformation runner)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from rocky_engine.hooks.sink import NullEventSink
from rocky_engine.project import load_project
from rocky_engine.run.options import RunOptions
from rocky_engine.run.runner import execute_run
from tests.engine.replication.conftest import ReplicationProject

PINNED = datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


def test_a_replication_run_takes_every_timestamp_from_its_clock(rp: ReplicationProject) -> None:
    rp.configure(sections="\n[pipeline.raw.checks]\nrow_count = true\n")
    rp.source_table("src__a", "orders", rows=5)
    rp.source_table("src__a", "items", rows=3)
    project = load_project(rp.config, env=dict(os.environ))
    out = execute_run(project, RunOptions(pipeline="raw"), clock=lambda: PINNED, events=NullEventSink())
    assert out.status == "Success" and out.tables_copied == 2
    with rp.store() as store:
        record = store.runs.get(str(out.run_id))
        progress = store.progress.entries(str(out.run_id))
        marks = store.watermarks.all()
        checks = store.checks.for_run(str(out.run_id))
    assert record is not None and (record.started_at, record.finished_at) == (PINNED, PINNED)
    assert {(e.started_at, e.finished_at) for e in record.models_executed} == {(PINNED, PINNED)}
    assert len(progress) == 2 and {p.finished_at for p in progress} == {PINNED}
    assert len(marks) == 2 and {w.updated_at for w in marks} == {PINNED}
    assert len(checks) == 2 and {c.recorded_at for c in checks} == {PINNED}
