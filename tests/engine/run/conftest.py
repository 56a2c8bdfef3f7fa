"""Shared fixtures for run tests: a transformation project on a real DuckDB file, run in process or
through a real ``rocky`` subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from rocky_engine.run.output import RunOutput
from rocky_engine.state.runs import RunRecord

ROCKY = [sys.executable, "-m", "rocky_engine.cli.main"]

ROCKY_TOML = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.{pipeline}]
type = "transformation"
models = "models/**"
"""


@dataclass
class Cli:
    """A finished ``rocky`` subprocess."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.stdout)
        return doc


@dataclass
class WarehouseProject:
    """A rocky.toml, a models/ directory and a DuckDB warehouse ``wh.duckdb`` (catalog ``wh``)."""

    root: Path
    pipeline: str = "models"
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.root / "rocky.toml"

    @property
    def warehouse(self) -> Path:
        return self.root / "wh.duckdb"

    @property
    def state_path(self) -> Path:
        return self.root / "models" / ".rocky-state.db"

    def write_config(self, text: str) -> None:
        self.config.write_text(textwrap.dedent(text))

    def model(self, name: str, sql: str, toml: str | None = None, subdir: str = "") -> Path:
        """Write ``models/<subdir>/<name>.sql`` (and its sidecar when ``toml`` is given)."""
        directory = self.root / "models" / subdir
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.sql"
        path.write_text(textwrap.dedent(sql))
        if toml is not None:
            (directory / f"{name}.toml").write_text(textwrap.dedent(toml))
        return path

    def sql(self, *statements: str) -> None:
        """Run statements against the warehouse (source data) and close it again."""
        con = duckdb.connect(str(self.warehouse))
        try:
            for statement in statements:
                con.execute(statement)
        finally:
            con.close()

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        con = duckdb.connect(str(self.warehouse))
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()

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

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Cli:
        """A real ``rocky -c <config> <args>`` subprocess."""
        proc = subprocess.run(
            [*ROCKY, "-c", str(self.config), *args],
            capture_output=True,
            text=True,
            cwd=self.root,
            env=child_env(env),
            timeout=timeout,
        )
        return Cli(proc.returncode, proc.stdout, proc.stderr)

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*ROCKY, "-c", str(self.config), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
            env=child_env(env),
        )

    def runs(self) -> list[RunRecord]:
        from rocky_engine.state.store import StateStore

        with StateStore.open(self.state_path, writer=False) as store:
            return store.runs.list()


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_")}
    env.update(extra or {})
    return env


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
