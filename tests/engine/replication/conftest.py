"""Replication test projects: a rocky.toml and a real DuckDB warehouse ``wh.duckdb`` (catalog ``wh``)
whose ``src__*`` schemas are the sources; runs happen in process or through a real ``rocky`` subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from rocky_engine.run.context import NullEventSink
from rocky_engine.run.output import RunOutput
from rocky_engine.state.store import StateStore

ROCKY = [sys.executable, "-m", "rocky_engine.cli.main"]

CONFIG = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.raw]
type = "replication"
strategy = "{strategy}"
timestamp_column = "ts"
{extra}

[pipeline.raw.source.schema_pattern]
prefix = "src"
separator = "__"
components = {components}

[pipeline.raw.target]
catalog_template = "wh"
schema_template = "{schema_template}"
{sections}
"""


@dataclass
class Cli:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.stdout)
        return doc


@dataclass
class ReplicationProject:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.root / "rocky.toml"

    @property
    def warehouse(self) -> Path:
        return self.root / "wh.duckdb"

    @property
    def state_path(self) -> Path:
        return self.root / ".rocky-state.db"

    def configure(
        self,
        *,
        strategy: str = "incremental",
        components: str = '["source"]',
        schema_template: str = "stg__{source}",
        extra: str = "",
        sections: str = "",
    ) -> None:
        self.config.write_text(
            CONFIG.format(
                strategy=strategy, components=components, schema_template=schema_template,
                extra=textwrap.dedent(extra), sections=textwrap.dedent(sections),
            )
        )

    def write_config(self, text: str) -> None:
        self.config.write_text(textwrap.dedent(text))

    # ------------------------------------------------------------------ warehouse

    def sql(self, *statements: str) -> None:
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

    def source_table(self, schema: str, table: str, rows: int = 10, start: int = 0) -> None:
        """``schema.table`` with ``id``, ``v`` and ``ts`` (one second apart), rows ``start..start+rows``."""
        self.sql(
            f"CREATE SCHEMA IF NOT EXISTS {schema}",
            f"CREATE TABLE {schema}.{table} AS SELECT range AS id, 'v' || range AS v, "
            f"TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range({start}, {start + rows})",
        )

    def append(self, schema: str, table: str, start: int, rows: int) -> None:
        self.sql(
            f"INSERT INTO {schema}.{table} (id, v, ts) SELECT range, 'v' || range, "
            f"TIMESTAMP '2026-01-01' + to_seconds(range) FROM range({start}, {start + rows})"
        )

    def count(self, relation: str) -> int:
        return int(self.query(f"SELECT count(*) FROM {relation}")[0][0])

    # ------------------------------------------------------------------ running

    def run(self, events: Any = None, **options: Any) -> RunOutput:
        """``rocky run --pipeline raw`` in this process; ``options`` are RunOptions fields."""
        from rocky_engine.project import load_project
        from rocky_engine.run.options import RunOptions
        from rocky_engine.run.runner import execute_run

        options.setdefault("pipeline", "raw")
        project = load_project(self.config, env={**os.environ, **self.env})
        return execute_run(project, RunOptions(**options), events=events or NullEventSink())

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Cli:
        proc = subprocess.run(
            [*ROCKY, "-c", str(self.config), *args],
            capture_output=True, text=True, cwd=self.root, env=child_env(env), timeout=timeout,
        )
        return Cli(proc.returncode, proc.stdout, proc.stderr)

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*ROCKY, "-c", str(self.config), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.root, env=child_env(env),
        )

    @contextmanager
    def store(self) -> Iterator[StateStore]:
        with StateStore.open(self.state_path, writer=False) as store:
            yield store

    def watermark(self, key: str) -> str | None:
        with self.store() as store:
            return store.watermarks.get(key)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_")}
    env.update(extra or {})
    return env


class RecordingSink:
    """An event sink that records events and can run a callback on one (a test seam for mid-run faults)."""

    def __init__(self, on_event: Any = None) -> None:
        self.events: list[tuple[str, str | None]] = []
        self._on_event = on_event

    def fire(
        self, event: str, *, model: str | None = None, table: str | None = None, error: str | None = None,
        duration_ms: int | None = None, metadata: dict[str, Any] | None = None,
    ) -> None:
        self.events.append((event, table))
        if self._on_event is not None:
            self._on_event(event, table)

    def count(self, event: str, table: str | None = None) -> int:
        return sum(1 for e, t in self.events if e == event and (table is None or t == table))


@pytest.fixture
def rp(tmp_path: Path) -> ReplicationProject:
    """A replication project ``raw``: ``src__<source>`` schemas into ``stg__<source>``, incremental on ts."""
    project = ReplicationProject(tmp_path)
    project.configure()
    return project
