"""Edge cases of a transformation run: no models, no models directory, interrupted planning, progress."""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from rocky_engine.errors import ModelError, RockyError
from rocky_engine.project import load_project
from rocky_engine.run.context import RunContext
from rocky_engine.run.interrupt import InterruptGuard
from rocky_engine.run.options import RunOptions
from rocky_engine.run.progress_display import RunProgress
from rocky_engine.run.transformation import TransformationRunner
from rocky_engine.state.store import StateStore

if TYPE_CHECKING:
    from conftest import WarehouseProject


def test_a_project_without_models_succeeds_with_nothing_built(wp: WarehouseProject) -> None:
    out = wp.run()
    assert out.status == "Success"
    assert out.tables_copied == 0 and out.materializations == []
    [record] = wp.runs()
    assert record.status == "Success" and record.models_executed == []


def test_only_ephemeral_models_build_nothing(wp: WarehouseProject) -> None:
    wp.model("e", "SELECT 1 AS x", '[strategy]\ntype = "ephemeral"\n')
    out = wp.run()
    assert out.status == "Success" and out.tables_copied == 0
    assert wp.relation_kind("main", "e") is None


def test_missing_models_directory_fails_before_any_record(wp: WarehouseProject) -> None:
    shutil.rmtree(wp.root / "models")
    res = wp.cli("run")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == (
        f"error: models directory {wp.root / 'models'} does not exist; create it, or point `models` in the "
        "transformation pipeline at the right glob\n"
    )


def test_model_load_error_fails_the_run_with_its_message(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT * FROM b")
    wp.model("b", "SELECT * FROM a")
    with pytest.raises(ModelError, match=r"circular dependency detected involving: \['a', 'b'\]"):
        wp.run()
    res = wp.cli("run")
    assert res.returncode == 1
    assert res.stderr.startswith("error: circular dependency detected involving: ['a', 'b'];")
    assert wp.runs() == []


def test_a_planning_error_after_a_signal_is_reported_as_an_interruption(wp: WarehouseProject) -> None:
    # A signal that cancels a planning statement surfaces as an error from that statement; with the
    # stop flag set, the runner reports an interrupted run instead of the cancelled statement's error.
    wp.model("a", "SELECT 1 AS x", '[target]\ncatalog = "other"\n')  # planning raises
    project = load_project(wp.config)
    guard = InterruptGuard()
    guard.stop.set()
    with StateStore.open(wp.state_path) as store:
        ctx = RunContext(
            project=project, pipeline_name="models", options=RunOptions(), store=store,
            run_id="run-20260101-000000-000", started_at=datetime.now(UTC), guard=guard,
            log=logging.getLogger("test"),
        )
        out = TransformationRunner(ctx).run()
    assert out.interrupted is True
    assert out.status == "Failure"
    assert out.exit_code() == 130


def test_the_same_planning_error_without_a_signal_is_raised(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS x", '[target]\ncatalog = "other"\n')
    project = load_project(wp.config)
    with StateStore.open(wp.state_path) as store:
        ctx = RunContext(
            project=project, pipeline_name="models", options=RunOptions(), store=store,
            run_id="run-20260101-000000-000", started_at=datetime.now(UTC), guard=InterruptGuard(),
            log=logging.getLogger("test"),
        )
        with pytest.raises(RockyError, match="targets catalog 'other'"):
            TransformationRunner(ctx).run()


def test_progress_counts_without_a_terminal() -> None:
    progress = RunProgress(3, "p", enabled=False)
    progress.advance(True)
    progress.advance(False)
    progress.close()
    assert (progress.done, progress.failed) == (2, 1)


def test_progress_bar_draws_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    progress = RunProgress(10, "models", enabled=True)
    for i in range(10):
        progress.advance(i % 3 != 0)
    progress.close()
    progress.close()  # idempotent
    assert (progress.done, progress.failed) == (10, 4)
    assert capsys.readouterr().out == ""  # never on stdout, where the JSON goes
