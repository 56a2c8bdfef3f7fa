"""Replication test projects: a rocky.toml and a real DuckDB warehouse ``wh.duckdb`` (catalog ``wh``)
whose ``src__*`` schemas are the sources; runs happen in process or through a real ``rocky`` subprocess."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.hooks.sink import NullEventSink
from rocky_engine.run.output import RunOutput
from rocky_engine.state.store import StateStore
from tests.fixtures.projects import DuckDBProject

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
class ReplicationProject(DuckDBProject):
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

    # ------------------------------------------------------------------ warehouse

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

    @contextmanager
    def store(self) -> Iterator[StateStore]:
        with StateStore.open(self.state_path, writer=False) as store:
            yield store

    def watermark(self, key: str) -> str | None:
        with self.store() as store:
            return store.watermarks.get(key)


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
