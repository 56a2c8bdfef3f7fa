"""Everything one pipeline runner needs, assembled once by the run dispatcher."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from rocky_engine.hooks.sink import EventSink, NullEventSink
from rocky_engine.run.interrupt import InterruptGuard
from rocky_engine.run.options import RunOptions
from rocky_engine.state._time import now_utc

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig
    from rocky_engine.project import Project
    from rocky_engine.run.events import RunEventStream
    from rocky_engine.state.store import StateStore


@dataclass
class RunContext:
    project: Project
    pipeline_name: str
    options: RunOptions
    store: StateStore
    run_id: str
    started_at: datetime
    guard: InterruptGuard
    log: logging.Logger
    events: EventSink = field(default_factory=NullEventSink)
    #: ``--resume`` / ``--resume-latest``: the run resumed from, and the table keys it finished (skipped)
    resumed_from: str | None = None
    completed_keys: frozenset[str] = frozenset()
    #: the run's clock (UTC): every timestamp a runner records or compares with comes from it
    clock: Callable[[], datetime] = now_utc

    @cached_property
    def stream(self) -> RunEventStream:
        """The run's ``rocky.events`` stream (JSON lines on stderr, Dagster Pipes), opened on first use."""
        from rocky_engine.run.events import RunEventStream

        return RunEventStream.open(self.pipeline_name, self.run_id)

    @property
    def config(self) -> RockyConfig:
        return self.project.config

    @property
    def pipeline(self) -> Any:
        return self.project.config.pipeline(self.pipeline_name)
