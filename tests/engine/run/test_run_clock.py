"""The run's clock is injected (DESIGN "Conventions"): every timestamp a run writes or compares with comes
from the ``clock`` given to ``execute_run`` (carried on ``RunContext``), not from the wall clock.

A clock pinned years away from the machine's makes any timestamp read from the wall clock stand out."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rocky_engine.project import load_project
from rocky_engine.run.options import RunOptions
from rocky_engine.run.runner import execute_run
from rocky_engine.state.store import StateStore
from tests.fixtures.projects import TRANSFORMATION_TOML

if TYPE_CHECKING:
    from conftest import WarehouseProject

PINNED = datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
HOOKS = "".join(
    f'\n[[hook.on_{event}]]\ncommand = "cat >> events.jsonl"\n'
    for event in ("pipeline_start", "after_model_run", "pipeline_complete")
)


def test_a_transformation_run_takes_every_timestamp_from_its_clock(wp: WarehouseProject) -> None:
    wp.write_config(TRANSFORMATION_TOML.format(pipeline="models") + HOOKS
                    + "\n[pipeline.models.checks]\nrow_count = true\n")
    wp.model("events", "SELECT 1 AS id, TIMESTAMP '2026-01-01' AS ts",
             toml='[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\n')
    project = load_project(wp.config, env=dict(os.environ))
    out = execute_run(project, RunOptions(), clock=lambda: PINNED)
    assert out.status == "Success"
    assert out.run_id == "run-20310506-070809-123"
    assert [m.started_at for m in out.materializations] == ["2031-05-06T07:08:09.123000Z"]
    with StateStore.open(wp.state_path, writer=False) as store:
        record = store.runs.get(out.run_id)
        marks = store.watermarks.all()
        checks = store.checks.for_run(out.run_id)
    assert record is not None
    assert (record.started_at, record.finished_at) == (PINNED, PINNED)
    assert [(e.started_at, e.finished_at) for e in record.models_executed] == [(PINNED, PINNED)]
    assert [(w.key, w.updated_at) for w in marks] == [("wh.main.events", PINNED)]
    assert [(c.check_name, c.recorded_at) for c in checks] == [("row_count", PINNED)]
    events = [json.loads(line) for line in (wp.root / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["timestamp"]) for e in events] == [
        ("pipeline_start", "2031-05-06T07:08:09.123Z"),
        ("after_model_run", "2031-05-06T07:08:09.123Z"),
        ("pipeline_complete", "2031-05-06T07:08:09.123Z"),
    ]
