"""Everything one pipeline runner needs, assembled once by the run dispatcher."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from rocky_engine.run.interrupt import InterruptGuard
from rocky_engine.run.options import RunOptions

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig
    from rocky_engine.project import Project
    from rocky_engine.state.store import StateStore


class EventSink(Protocol):
    """Receives lifecycle events (CONTRACT section 9); the hooks subsystem implements it."""

    def fire(
        self,
        event: str,
        *,
        model: str | None = None,
        table: str | None = None,
        error: str | None = None,
        duration_ms: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None: ...


class NullEventSink:
    """Used when no hooks are configured."""

    def fire(
        self,
        event: str,
        *,
        model: str | None = None,
        table: str | None = None,
        error: str | None = None,
        duration_ms: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        return None


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

    @property
    def config(self) -> RockyConfig:
        return self.project.config

    @property
    def pipeline(self) -> Any:
        return self.project.config.pipeline(self.pipeline_name)
