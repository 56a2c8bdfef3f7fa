"""``--scheduler``: the reconciler of ``rocky tick`` in-process, one tick every ``--poll-interval-seconds``.

- The first tick waits until the server is up (job sweep done, listener bound), so a scheduled run never
  starts before the API can report it, and never outlives a failed startup.
- rocky.toml is re-read at every tick; a load error is logged, counted and that tick skipped. Nothing a
  tick raises ends the loop.
- Each tick takes the server's mutation gate without waiting: while an API job runs, the tick is skipped
  (``mutation_in_progress``) and demand is re-evaluated at the next poll; while a tick runs, an API run gets
  409. Another process is arbitrated by ``.rocky/tick.lock`` and the store's writer lock as usual.
- Scheduled children are recorded as jobs (``job_id`` = submission id) by :class:`RecordingSpawner`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from rocky_engine.errors import ConfigError, RockyError, StateLockedError
from rocky_engine.logs import get_logger
from rocky_engine.schedule.reconciler import Reconciler, ReconcilerOptions
from rocky_engine.schedule.spawner import ChildRequest, ChildResult
from rocky_engine.server.context import ServerContext, TickStatus
from rocky_engine.server.job_results import output_path
from rocky_engine.state._time import now_utc
from rocky_engine.state.store import StateStore

log = get_logger("server")


class RecordingSpawner:
    """The resident reconciler's spawner: each child becomes a job row, then runs on the server's spawner.

    The reconciler has closed the store before it calls :meth:`run` and reopens it after, so the rows are
    written in that window (the child holds the writer lock in between).
    """

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    def run(self, request: ChildRequest, on_start: Callable[[int], None] | None = None) -> ChildResult:
        jobs = self.ctx.jobs
        row = jobs.scheduled_started(request)
        request = replace(request, stdout_path=output_path(self.ctx.projects.current().dot_rocky, row.job_id))
        self.ctx.gate.set_job(row.job_id)

        def started(pid: int) -> None:
            if on_start is not None:
                on_start(pid)
            jobs.scheduled_pid(row.job_id, pid)

        try:
            result = self.ctx.spawner.run(request, started)
        finally:
            self.ctx.gate.set_job(None)
        jobs.scheduled_finished(row, result, request.stdout_path)
        return result


class SchedulerLoop:
    """The resident scheduler thread; :meth:`start` it, :meth:`request_stop` and :meth:`join` to end it."""

    def __init__(self, ctx: ServerContext, *, clock: Callable[[], datetime] = now_utc) -> None:
        self.ctx = ctx
        self.stop = threading.Event()
        self.reconciler = Reconciler(
            spawner=RecordingSpawner(ctx), clock=clock, options=ReconcilerOptions(resident=True),
            stop=self.stop,
        )
        self.thread = threading.Thread(target=self._main, name="rocky-scheduler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def request_stop(self) -> None:
        self.stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _main(self) -> None:
        while not self.ctx.started.wait(0.05):
            if self.stop.is_set():
                return
        log.info("resident scheduler started: a tick every %s s", self.ctx.settings.poll_interval_seconds)
        while not self.stop.is_set():
            try:
                self.tick_once()
            except BaseException as exc:  # the loop never dies; a bug is logged and the next poll retries
                log.error("scheduler tick failed unexpectedly (%s: %s); retrying at the next poll",
                          type(exc).__name__, exc)
                self._record("error", None, f"{type(exc).__name__}: {exc}")
            self.stop.wait(self.ctx.settings.poll_interval_seconds)

    def _record(self, result: str, duration: float | None, detail: str | None = None) -> None:
        if duration is None:
            self.ctx.metrics.tick(result)
        self.ctx.last_tick = TickStatus(
            at=self.ctx.wall(), result=result,
            duration_ms=None if duration is None else int(duration * 1000), detail=detail,
        )

    def tick_once(self) -> str:
        """One tick attempt; returns its result label (``completed``, ``mutation_in_progress`` ...)."""
        if self.stop.is_set() or self.ctx.draining.is_set():
            return "stopped"
        ctx = self.ctx
        if not ctx.gate.try_acquire("scheduler"):
            holder = ctx.gate.holder()
            detail = f"job {holder.job_id} is running" if holder and holder.job_id else None
            self._record("mutation_in_progress", None, detail)
            return "mutation_in_progress"
        try:
            return self._tick()
        finally:
            ctx.gate.release()

    def _tick(self) -> str:
        ctx = self.ctx
        try:
            project = ctx.projects.reload()
        except RockyError as exc:
            log.error("rocky.toml could not be loaded; tick skipped, the next poll re-reads it: %s", exc)
            self._record("config_error", None, str(exc))
            return "config_error"
        self._housekeeping()
        t0 = time.perf_counter()
        try:
            out = self.reconciler.tick(project)
        except ConfigError as exc:
            log.error("schedule cannot be resolved; tick skipped: %s", exc)
            self._record("config_error", None, str(exc))
            return "config_error"
        except RockyError as exc:
            log.error("tick failed: %s", exc)
            self._record("error", None, str(exc))
            return "error"
        duration = time.perf_counter() - t0
        result = ctx.metrics.observe_tick(out, duration)
        for error in out.errors:
            log.error("tick: %s", error)
        if out.executed:
            log.info("tick: %d run(s): %s", len(out.executed),
                     ", ".join(f"{e.pipeline}={e.outcome}" for e in out.executed))
        self._record(result, duration)
        return result

    def _housekeeping(self) -> None:
        """Write job rows left pending and a deferred job sweep, when there are any (cheap otherwise)."""
        jobs = self.ctx.jobs
        if not jobs.needs_housekeeping():
            return
        try:
            store = StateStore.open(self.ctx.projects.state_path(), writer=True)
        except StateLockedError:
            return
        with store:
            jobs.housekeeping(store)
