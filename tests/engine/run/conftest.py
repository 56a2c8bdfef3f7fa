"""Shared fixtures for run tests: a transformation project on a real DuckDB file, run in process or
through a real ``rocky`` subprocess."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.run.output import RunOutput
from rocky_engine.state.runs import RunRecord
from tests.fixtures.projects import ROCKY, DuckDBProject
from tests.fixtures.projects import TRANSFORMATION_TOML as ROCKY_TOML


@dataclass
class WarehouseProject(DuckDBProject):
    """A rocky.toml, a models/ directory and a DuckDB warehouse ``wh.duckdb`` (catalog ``wh``)."""

    pipeline: str = "models"

    @property
    def state_path(self) -> Path:
        return self.root / "models" / ".rocky-state.db"

    def model(self, name: str, sql: str, toml: str | None = None, subdir: str = "") -> Path:
        """Write ``models/<subdir>/<name>.sql`` (and its sidecar when ``toml`` is given)."""
        directory = self.root / "models" / subdir
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.sql"
        path.write_text(textwrap.dedent(sql))
        if toml is not None:
            (directory / f"{name}.toml").write_text(textwrap.dedent(toml))
        return path

    def relation_kind(self, schema: str, table: str) -> str | None:
        rows = self.query(
            "SELECT table_type FROM information_schema.tables "
            f"WHERE table_catalog = 'wh' AND table_schema = '{schema}' AND table_name = '{table}'"
        )
        return str(rows[0][0]) if rows else None

    def run(self, **options: Any) -> RunOutput:
        """``rocky run`` in this process (fast); ``options`` are RunOptions fields."""
        from rocky_engine.project import load_project
        from rocky_engine.run.options import RunOptions
        from rocky_engine.run.runner import execute_run

        project = load_project(self.config, env={**os.environ, **self.env})
        return execute_run(project, RunOptions(**options))

    def runs(self) -> list[RunRecord]:
        from rocky_engine.state.store import StateStore

        with StateStore.open(self.state_path, writer=False) as store:
            return store.runs.list()


@pytest.fixture
def wp(tmp_path: Path) -> WarehouseProject:
    """An empty transformation project with one pipeline ``models``."""
    project = WarehouseProject(tmp_path)
    project.write_config(ROCKY_TOML.format(pipeline=project.pipeline))
    (tmp_path / "models").mkdir()
    return project


@pytest.fixture
def rocky_cmd() -> list[str]:
    """The command line that starts ``rocky`` (for subprocesses outside a WarehouseProject)."""
    return list(ROCKY)
