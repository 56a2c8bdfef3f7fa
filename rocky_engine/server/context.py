"""The shared state of one server process: settings, the project as last loaded, the mutation gate, the
job manager, metrics, the drain flags, and the one read permit.

Routes, the scheduler loop and the drain all hold the same :class:`ServerContext`; nothing here is global,
so tests build as many servers as they like in one process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rocky_engine.errors import ConfigError, RockyError
from rocky_engine.logs import get_logger
from rocky_engine.project import Project, load_project
from rocky_engine.schedule.plan import SchedulePlan, build_plan
from rocky_engine.schedule.spawner import SubprocessSpawner
from rocky_engine.server.gate import MutationGate
from rocky_engine.server.jobs import JobManager
from rocky_engine.server.metrics import Metrics
from rocky_engine.server.ratelimit import TokenBucket
from rocky_engine.server.schedule_cache import PipelinesCache
from rocky_engine.server.settings import TOKEN_ENV, WEBHOOK_SECRET_ENV, ServerSettings
from rocky_engine.state._time import now_utc, rfc3339
from rocky_engine.state.store import StateStore
from rocky_engine.wire.schedule import LastTick

log = get_logger("server")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ProjectHolder:
    """The project as last loaded. :meth:`reload` re-reads rocky.toml (every tick does); :meth:`current`
    re-reads it only when the file changed, and keeps the last good project when the new one is broken.

    The state file is settled once, from the project the server started with, and every reload is pinned
    to it (as ``--state-path``): an edit of rocky.toml or a ``models/`` directory appearing never moves the
    store under a running server, its jobs or its scheduler's children."""

    def __init__(self, settings: ServerSettings, project: Project) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._project = project
        self._path = project.config.path
        self._stamp = _stamp(self._path)
        self._state_path = project.state_path()
        self._plan: SchedulePlan | ConfigError | None = None
        #: the last load error (None once a load succeeds again)
        self.config_error: str | None = None

    def reload(self) -> Project:
        """Load rocky.toml now.

        Raises:
            RockyError: it does not load (recorded in ``config_error``; the last good project is kept).
        """
        stamp = _stamp(self._path)
        try:
            project = load_project(
                self._settings.config_path,
                state_path=str(self._state_path),
                state_namespace=self._settings.state_namespace,
            )
        except RockyError as exc:
            with self._lock:
                self.config_error = str(exc)
                self._stamp = stamp
            raise
        with self._lock:
            self._project, self._stamp = project, stamp
            self._plan = None
            self.config_error = None
        return project

    def current(self) -> Project:
        """The project, reloaded first when rocky.toml changed on disk (a broken edit keeps the old one)."""
        if _stamp(self._path) != self._stamp:
            with contextlib.suppress(RockyError):
                self.reload()
        with self._lock:
            return self._project

    def plan(self) -> tuple[Project, SchedulePlan]:
        """The current project and its schedule plan (crons checked), built once per loaded config.

        Raises:
            ConfigError: the ``after`` references form a cycle.
        """
        project = self.current()
        with self._lock:
            if project is not self._project:  # reloaded between the two reads: build for this one
                return project, build_plan(project.config, check_crons=True)
            if self._plan is None:
                try:
                    self._plan = build_plan(project.config, check_crons=True)
                except ConfigError as exc:
                    self._plan = exc
            if isinstance(self._plan, ConfigError):
                raise self._plan
            return project, self._plan

    def state_path(self) -> Path:
        """The state file settled at start (never re-resolved while the server runs)."""
        return self._state_path


@dataclass
class TickStatus:
    """The resident scheduler's last tick attempt, for ``/api/v1/schedule`` and ``/metrics``."""

    at: float | None = None
    result: str | None = None
    duration_ms: int | None = None
    detail: str | None = None

    def wire(self, wall: float) -> LastTick | None:
        """The attempt as ``/api/v1/schedule`` shows it; None before the first one."""
        if self.at is None:
            return None
        return LastTick(
            at=rfc3339(datetime.fromtimestamp(self.at, tz=UTC)), result=self.result,
            duration_ms=self.duration_ms, detail=self.detail or None,
            age_seconds=round(max(0.0, wall - self.at), 1),
        )


@dataclass
class ServerContext:
    """Everything a route, the scheduler loop and the drain share."""

    settings: ServerSettings
    projects: ProjectHolder
    gate: MutationGate
    metrics: Metrics
    spawner: SubprocessSpawner
    jobs: JobManager
    bucket: TokenBucket
    owner: dict[str, Any]
    #: set on SIGTERM/SIGINT: start no new work
    draining: threading.Event = field(default_factory=threading.Event)
    #: set once the listener is bound and serving (the scheduler's first tick waits for it)
    started: threading.Event = field(default_factory=threading.Event)
    #: the server's own store reads queue on one permit, so they never contend with each other
    read_permit: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(1))
    wall: Callable[[], float] = time.time
    last_tick: TickStatus = field(default_factory=TickStatus)
    #: the schedule document's pipelines, rendered again only when they changed
    schedule_cache: PipelinesCache = field(default_factory=PipelinesCache)
    address: str = ""

    @contextlib.contextmanager
    def read_store(self) -> Iterator[StateStore]:
        """The state store opened read-only (a missing store reads as empty)."""
        with self.read_permit, StateStore.open(self.projects.state_path(), writer=False) as store:
            yield store


def server_owner() -> dict[str, Any]:
    """Who launched a job: this process (``instance`` tells two lives of one pid apart, e.g. pid 1)."""
    return {
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "instance": uuid.uuid4().hex,
        "started_at": rfc3339(now_utc()),
    }


def child_environment(settings: ServerSettings) -> dict[str, str]:
    """The environment of child runs: the server's, without the server's own secrets (a child's hooks
    and connectors have no business with the API token or the webhook secret)."""
    base = os.environ if settings.child_env is None else settings.child_env
    return {k: v for k, v in base.items() if k not in (TOKEN_ENV, WEBHOOK_SECRET_ENV)}


def build_context(settings: ServerSettings, project: Project) -> ServerContext:
    """Wire one server's parts together (nothing starts running here)."""
    projects = ProjectHolder(settings, project)
    gate = MutationGate()
    metrics = Metrics()
    spawner = SubprocessSpawner(
        kill_grace_seconds=settings.kill_grace_seconds, env=child_environment(settings)
    )
    owner = server_owner()
    draining = threading.Event()
    read_permit = threading.Semaphore(1)

    @contextlib.contextmanager
    def read_store() -> Iterator[StateStore]:
        with read_permit, StateStore.open(projects.state_path(), writer=False) as store:
            yield store

    jobs = JobManager(
        projects=projects, gate=gate, spawner=spawner, metrics=metrics, owner=owner, draining=draining,
        read_store=read_store,
    )
    bucket = TokenBucket(settings.webhook_rate_per_second, settings.webhook_burst)
    return ServerContext(
        settings=settings, projects=projects, gate=gate, metrics=metrics, spawner=spawner, jobs=jobs,
        bucket=bucket, owner=owner, draining=draining, read_permit=read_permit,
    )
