"""Jobs: the child runs a server launches, persisted in the state store (``state/jobs.py``).

The child of a run holds the store's writer lock while it runs, so a job row is written just before the
child starts (``running``, with the server as ``owner``) and finalized just after it ends, from the
child's exit and its run record (matched by ``submission_id`` = ``job_id``). A finalization that cannot
get the store (another process grabbed it) stays pending in memory and is written at the next chance.

API jobs (``POST /api/v1/jobs/run``) take the mutation gate for their whole life: one mutation at a time,
the second gets ``409 mutation_in_progress`` with the running job id. Scheduled runs are recorded by the
scheduler's spawner (``scheduler_loop.RecordingSpawner``) with ``job_id`` = the submission id.

A restarted server :meth:`JobManager.sweep`\\ s the rows it finds unfinished: a job whose owning server is
alive elsewhere is left alone; one whose child still runs is adopted (watched until it exits, then
finalized from its run record); the rest are finalized from their run record, or failed when there is none.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocky_engine.errors import RockyError, StateError, StateLockedError
from rocky_engine.logs import get_logger
from rocky_engine.schedule.claim_lifecycle import ChildRegistry
from rocky_engine.schedule.spawner import ChildRequest, ChildResult, SubprocessSpawner
from rocky_engine.server.job_results import (
    finished_row,
    output_path,
    owner_alive,
    read_output,
    recovered_row,
)
from rocky_engine.state._time import now_utc
from rocky_engine.state.jobs import JobRepo, JobRow
from rocky_engine.state.store import StateStore

if TYPE_CHECKING:
    from datetime import datetime

    from rocky_engine.project import Project
    from rocky_engine.server.context import ProjectHolder
    from rocky_engine.server.gate import MutationGate
    from rocky_engine.server.metrics import Metrics

log = get_logger("server")

ReadStore = Callable[[], AbstractContextManager[StateStore]]

class JobRejected(RockyError):
    """A job request the server will not start; carries the HTTP answer."""

    def __init__(self, status: int, code: str, message: str, *, job_id: str | None = None) -> None:
        self.status = status
        self.code = code
        self.job_id = job_id
        super().__init__(message)


class JobManager:
    """Starts, records, finalizes and recovers jobs.

    Args:
        projects: the project holder (state path, pipelines).
        gate: the server's mutation gate.
        spawner: the one spawner of this server (the drain terminates its child).
        metrics: counters.
        owner: this server process (``context.server_owner()``).
        draining: set once the server drains: no new job starts.
        read_store: opens the store read-only under the server's read permit.
        clock: UTC now.
        persist_attempts, persist_pause_seconds: how long a finalization waits out another writer.
        adopt_poll_seconds: how often an adopted child is checked.
    """

    def __init__(
        self,
        *,
        projects: ProjectHolder,
        gate: MutationGate,
        spawner: SubprocessSpawner,
        metrics: Metrics,
        owner: dict[str, Any],
        draining: threading.Event,
        read_store: ReadStore,
        clock: Callable[[], datetime] = now_utc,
        persist_attempts: int = 25,
        persist_pause_seconds: float = 0.2,
        adopt_poll_seconds: float = 1.0,
    ) -> None:
        self.projects = projects
        self.gate = gate
        self.spawner = spawner
        self.metrics = metrics
        self.owner = owner
        self.draining = draining
        self.read_store = read_store
        self.clock = clock
        self.persist_attempts = persist_attempts
        self.persist_pause_seconds = persist_pause_seconds
        self.adopt_poll_seconds = adopt_poll_seconds
        self._lock = threading.Lock()
        #: jobs this process runs or watches (fresher than the store: the pid, the live state)
        self._live: dict[str, JobRow] = {}
        #: finished rows not yet written (the store was busy)
        self._pending: dict[str, JobRow] = {}
        self._threads: list[threading.Thread] = []
        self._sweep_due = True
        self._stop = threading.Event()

    # ------------------------------------------------------------------ store access

    def _registry(self) -> ChildRegistry:
        return ChildRegistry(self.projects.current().dot_rocky)

    def _open_writer(self, attempts: int) -> StateStore | None:
        path = self.projects.state_path()
        for attempt in range(attempts):
            try:
                return StateStore.open(path, writer=True)
            except StateLockedError:
                if attempt + 1 < attempts:
                    time.sleep(self.persist_pause_seconds)
        return None

    def _write(self, store: StateStore, rows: list[JobRow]) -> None:
        """Write ``rows`` plus every pending finalization, and run a due sweep (caller holds the writer)."""
        fresh = {r.job_id for r in rows}
        with self._lock:
            pending = [r for r in self._pending.values() if r.job_id not in fresh]
        JobRepo(store).upsert_many([*pending, *rows])
        with self._lock:
            for r in pending:
                self._pending.pop(r.job_id, None)
        if self._sweep_due:
            self._sweep_with(store)

    def needs_housekeeping(self) -> bool:
        """Pending finalizations or a deferred sweep are waiting for the store."""
        with self._lock:
            return self._sweep_due or bool(self._pending)

    def housekeeping(self, store: StateStore) -> None:
        """Flush pending finalizations and run a deferred sweep on a store the caller holds as writer."""
        self._write(store, [])

    def _finalize(self, row: JobRow, result: ChildResult, output_file: Path | None) -> JobRow:
        output = read_output(output_file)
        store = self._open_writer(self.persist_attempts)
        now = self.clock()
        if store is None:
            final = finished_row(row, result, None, now, output)
            with self._lock:
                self._pending[row.job_id] = final
                self._live.pop(row.job_id, None)
            log.warning("job %s finished (%s) but the state store stayed locked; its row is written at the "
                        "next chance", row.job_id, final.state)
            return final
        with store:
            final = finished_row(row, result, store, now, output)
            self._write(store, [final])
        with self._lock:
            self._live.pop(row.job_id, None)
        return final

    # ------------------------------------------------------------------ API jobs

    def submit_run(self, pipeline: str | None, filter_: str | None) -> JobRow:
        """Start ``rocky run`` as a job; returns the row written before the child started.

        Raises:
            JobRejected: draining (503), a bad request (400/404), the gate or the store is taken (409).
        """
        if self.draining.is_set():
            raise JobRejected(503, "draining", "the server is shutting down and starts no new runs")
        try:
            project = self.projects.current()
        except RockyError as exc:  # pragma: no cover - current() keeps the last good project
            raise JobRejected(500, "config_error", str(exc)) from exc
        names = sorted(project.config.pipelines)
        if pipeline is None:
            if len(names) != 1:
                raise JobRejected(
                    400, "bad_request",
                    f"'pipeline' is required: this project has {len(names)} pipelines ({', '.join(names)})",
                )
            pipeline = names[0]
        if pipeline not in project.config.pipelines:
            raise JobRejected(404, "pipeline_not_found", f"unknown pipeline '{pipeline}'; available "
                              f"pipelines: {', '.join(names) or '(none)'}")
        job_id = uuid.uuid4().hex
        if not self.gate.try_acquire("job", job_id):
            holder = self.gate.holder()
            what = "a scheduler tick" if holder and holder.kind == "scheduler" else "another job"
            running = holder.job_id if holder else None
            raise JobRejected(
                409, "mutation_in_progress",
                f"{what} is running{f' (job {running})' if running else ''}; retry when it finishes",
                job_id=running,
            )
        try:
            row = self._start_api_job(project, job_id, pipeline, filter_)
        except BaseException:
            self.gate.release()
            raise
        return row

    def _start_api_job(self, project: Project, job_id: str, pipeline: str, filter_: str | None) -> JobRow:
        now = self.clock()
        body: dict[str, Any] = {"pipeline": pipeline}
        if filter_:
            body["filter"] = filter_
        row = JobRow(
            job_id=job_id, kind="run", state="running", submitted_at=now, started_at=now, pipeline=pipeline,
            request=body, owner=self.owner,
        )
        try:
            store = StateStore.open(project.state_path(), writer=True)
        except StateLockedError:
            raise JobRejected(
                409, "mutation_in_progress",
                "another rocky process holds the state store writer lock (a run or a tick); retry when it "
                "finishes",
            ) from None
        except StateError as exc:
            raise JobRejected(500, "state_error", str(exc)) from exc
        with store:
            self._write(store, [row])
        schedule = project.config.pipeline(pipeline).schedule
        timeout = schedule.timeout_minutes * 60 if schedule is not None and schedule.timeout_minutes else None
        request = ChildRequest(
            pipeline=pipeline, config_path=project.config.path, state_path=project.state_path(),
            trigger="manual", submission_id=job_id, timeout_seconds=timeout, cwd=project.root,
            extra_args=("--filter", filter_) if filter_ else (),
            stdout_path=output_path(project.dot_rocky, job_id),
            state_namespace=project.state_namespace,
        )
        with self._lock:
            self._live[job_id] = row
        thread = threading.Thread(
            target=self._run_api_job, args=(row, request, project.dot_rocky), name=f"rocky-job-{job_id[:8]}",
            daemon=True,
        )
        self._track(thread)
        thread.start()
        log.info("job %s: running pipeline %s", job_id, pipeline)
        return row

    def _run_api_job(self, row: JobRow, request: ChildRequest, dot_rocky: Path) -> None:
        registry = ChildRegistry(dot_rocky)
        try:
            def started(pid: int) -> None:
                registry.register(row.job_id, pid, row.pipeline or "", self.clock())
                with self._lock:
                    self._live[row.job_id] = row.with_(pid=pid)

            try:
                result = self.spawner.run(request, started)
            except Exception as exc:  # a bug must not leave the gate held forever
                log.error("job %s: the child could not be run: %s", row.job_id, exc)
                result = ChildResult(127, started=False)
            finally:
                registry.forget(row.job_id)
            final = self._finalize(row, result, request.stdout_path)
            self.metrics.job_finished(str((final.result or {}).get("outcome", "failure")))
            log.info("job %s: %s (exit %s)", row.job_id, final.state, result.exit_code)
        finally:
            self.gate.release()

    # ------------------------------------------------------------------ scheduled runs

    def scheduled_started(self, request: ChildRequest) -> JobRow:
        """Record a scheduled child about to start (the reconciler has closed the store); a retry of the
        same submission re-opens its row."""
        now = self.clock()
        row = JobRow(
            job_id=request.submission_id, kind=request.trigger, state="running", submitted_at=now,
            started_at=now, pipeline=request.pipeline,
            request={"trigger": request.trigger, "pipeline": request.pipeline}, owner=self.owner,
            attempts=request.attempt,
        )
        store = self._open_writer(5)
        if store is None:
            log.warning("scheduled job %s: the state store is busy; its row is written when it finishes",
                        row.job_id)
        else:
            with store:
                earlier = JobRepo(store).get(row.job_id)
                if earlier is not None:
                    row = row.with_(submitted_at=earlier.submitted_at, started_at=earlier.started_at)
                self._write(store, [row])
        with self._lock:
            self._live[row.job_id] = row
        return row

    def scheduled_pid(self, job_id: str, pid: int) -> None:
        with self._lock:
            row = self._live.get(job_id)
            if row is not None:
                self._live[job_id] = row.with_(pid=pid)

    def scheduled_finished(self, row: JobRow, result: ChildResult, output_file: Path | None) -> JobRow:
        with self._lock:
            row = self._live.get(row.job_id, row)
        return self._finalize(row, result, output_file)

    # ------------------------------------------------------------------ reads

    def get(self, job_id: str) -> JobRow | None:
        """A live job from memory (it has the pid), a finalization not yet written, else the stored row."""
        with self._lock:
            live = self._live.get(job_id)
            pending = self._pending.get(job_id)
        if live is not None and not live.finished:
            return live
        if pending is not None:
            return pending
        with self.read_store() as store:
            return JobRepo(store).get(job_id)

    def list(self, limit: int = 50) -> list[JobRow]:
        with self.read_store() as store:
            rows = {r.job_id: r for r in JobRepo(store).list(limit)}
        with self._lock:
            for row in (*self._pending.values(), *self._live.values()):
                if not row.finished or row.job_id not in rows:
                    rows[row.job_id] = row
        return sorted(rows.values(), key=lambda r: (r.submitted_at, r.job_id), reverse=True)[:limit]

    def counts(self, store: StateStore) -> dict[str, int]:
        return JobRepo(store).counts()

    # ------------------------------------------------------------------ recovery

    def sweep(self) -> bool:
        """Finalize the jobs a previous server left unfinished; False when the store was busy (deferred)."""
        try:
            store = StateStore.open(self.projects.state_path(), writer=True)
        except StateLockedError:
            log.warning("job sweep deferred: another process holds the state store; it runs at the next "
                        "tick or job")
            return False
        with store:
            self._sweep_with(store)
        return True

    def _sweep_with(self, store: StateStore) -> None:
        self._sweep_due = False
        registry = self._registry()
        repo = JobRepo(store)
        for row in repo.unfinished():
            if owner_alive(row.owner, self.owner):
                continue
            if registry.alive(row.job_id):
                self._adopt(row)
                continue
            final = recovered_row(store, row, self.clock())
            registry.forget(row.job_id)  # its server died before it could; the job is settled now
            repo.upsert(final)
            log.warning("job %s (%s) was left %s by a server that is gone: %s", row.job_id,
                        row.pipeline or row.kind, row.state, final.error or final.state)

    def _adopt(self, row: JobRow) -> None:
        with self._lock:
            if row.job_id in self._live:
                return
            self._live[row.job_id] = row
        log.info("job %s: adopting a child that outlived its server; watching it until it exits", row.job_id)
        thread = threading.Thread(target=self._watch, args=(row,), name=f"rocky-adopt-{row.job_id[:8]}",
                                  daemon=True)
        self._track(thread)
        thread.start()

    def _watch(self, row: JobRow) -> None:
        registry = self._registry()
        while registry.alive(row.job_id) and not self._stop.wait(self.adopt_poll_seconds):
            pass
        if self._stop.is_set():
            with self._lock:
                self._live.pop(row.job_id, None)
            return
        store = self._open_writer(self.persist_attempts)
        if store is None:
            with self._lock:
                self._live.pop(row.job_id, None)
            self._sweep_due = True
            return
        registry.forget(row.job_id)  # the adopted child is gone; its job is settled next
        with store:
            final = recovered_row(store, row, self.clock())
            self._write(store, [final])
        with self._lock:
            self._live.pop(row.job_id, None)

    # ------------------------------------------------------------------ lifecycle

    def _track(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)

    def running_api_job(self) -> bool:
        with self._lock:
            return any(t.is_alive() and t.name.startswith("rocky-job-") for t in self._threads)

    def join(self, timeout: float | None = None) -> None:
        """Wait for job threads (the drain has already told the spawner to stop the child)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            threads = [t for t in self._threads if t.name.startswith("rocky-job-")]
        for thread in threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)

    def stop_watching(self) -> None:
        """Stop watching adopted children (they are not ours to stop); the next server adopts them."""
        self._stop.set()

    def flush(self) -> None:
        """Write pending finalizations now if the store can be had (at shutdown)."""
        with self._lock:
            if not self._pending:
                return
        store = self._open_writer(3)
        if store is None:
            with self._lock:
                lost = list(self._pending)
            log.error("could not write the final state of jobs %s: the state store stayed locked; the next "
                      "server finalizes them from their run records", ", ".join(lost))
            return
        with store:
            self._write(store, [])

