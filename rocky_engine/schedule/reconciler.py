"""The reconciler: one tick evaluates all standing demand and runs what is due (CONTRACT section 6).

A library: ``rocky tick`` runs one :meth:`Reconciler.tick`, ``rocky serve --scheduler`` calls it in a
loop. Time and processes are injected (``clock``, ``wall``, ``spawner``), so every path is testable
deterministically.

One live tick:

1. take the tick lock (a fresh holder: skip, ``tick_in_progress``; a wedged one: ``lock_overridden``);
2. open the state store as the writer (another writer: skip, ``state_busy``);
3. read the webhook spool; finalize demands for removed pipelines (loudly);
4. per pipeline in ``after`` order: resolve its stuck claims, decide (``decide.py``), and launch the
   winner: claim + anchor in one transaction, close the store, run the child, reopen, finalize, write an
   incident bundle on failure/partial; then its webhook demands, one run each;
5. stamp ``last_evaluated_at``, sweep orphaned claims, drop expired delivery markers.

A dry run opens the store read-only, takes no lock, writes nothing and spawns nothing.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from rocky_engine.errors import StateError, StateLockedError
from rocky_engine.logs import get_logger
from rocky_engine.project import Project
from rocky_engine.schedule.claim_lifecycle import (
    RESOLVE_AFTER,
    ChildRegistry,
    claim_key,
    outcome_of_exit,
    resolve_claim,
    row_after_outcome,
    webhook_claim_key,
)
from rocky_engine.schedule.clock import refuse_future_now
from rocky_engine.schedule.decide import Decision, decide
from rocky_engine.schedule.plan import PipelinePlan, SchedulePlan, build_plan, freshness_budget, restrict
from rocky_engine.schedule.recovery import Recovery
from rocky_engine.schedule.spawner import ChildRequest, ChildResult, Spawner, Trigger
from rocky_engine.schedule.spool import Demand, list_demands, spool_dir_of, sweep_markers
from rocky_engine.schedule.tick_lock import (
    HEARTBEAT_INTERVAL_SECONDS,
    STALE_AFTER_SECONDS,
    TickLock,
    age_text,
    holder_text,
)
from rocky_engine.schedule.tick_output import NOTABLE_REASONS, TickOutput
from rocky_engine.state._time import now_utc, rfc3339
from rocky_engine.state.schedule import ScheduleRepo, ScheduleRow
from rocky_engine.state.schedule_claims import Claim, ClaimRepo, Outcome
from rocky_engine.state.store import StateStore
from rocky_engine.wire.tick import Evaluated, Executed, Skipped, SourceEntry

log = get_logger("schedule")


@dataclass(frozen=True)
class ReconcilerOptions:
    """Knobs with production defaults; tests shrink the waits."""

    #: under ``rocky serve --scheduler``: incident pointers name the HTTP endpoints
    resident: bool = False
    stale_after_seconds: float = STALE_AFTER_SECONDS
    heartbeat_interval_seconds: float = HEARTBEAT_INTERVAL_SECONDS
    resolve_after: timedelta = RESOLVE_AFTER
    #: reopening the store after a child: attempts and the pause between them
    reopen_attempts: int = 50
    reopen_pause_seconds: float = 0.2


class Reconciler:
    """Evaluates demand and runs due pipelines; one :meth:`tick` per call.

    Args:
        spawner: runs a child to completion (``SubprocessSpawner`` in production).
        clock: the evaluation clock (UTC); ``rocky tick --now`` pins it.
        wall: seconds since the epoch for the tick-lock heartbeat (always real time in production).
        options: waits and thresholds.
        stop: set it (or call :meth:`request_stop`) to start no new work; a running child is left to the
            spawner (``SubprocessSpawner.terminate``).
    """

    def __init__(
        self,
        *,
        spawner: Spawner,
        clock: Callable[[], datetime] = now_utc,
        wall: Callable[[], float] = time.time,
        options: ReconcilerOptions | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.spawner = spawner
        self.clock = clock
        self.wall = wall
        self.options = options or ReconcilerOptions()
        self.stop = stop or threading.Event()

    def request_stop(self) -> None:
        self.stop.set()

    def tick(self, project: Project, *, dry_run: bool = False, pipeline: str | None = None) -> TickOutput:
        """Run one tick over ``project`` (only ``pipeline`` when given).

        Raises:
            ConfigError: an ``after`` cycle, or ``pipeline`` is not a pipeline.
            StateError: the state store cannot be opened (other than another writer holding it).
            UsageError: a live tick's clock is ahead of the wall clock (``clock.py``: it would date the
                stored cursors in the future).
        """
        t0 = time.perf_counter()
        now = self.clock()
        if not dry_run:
            refuse_future_now(now, self.wall())
        out = TickOutput(dry_run=dry_run, now=rfc3339(now))
        if pipeline is not None:
            project.config.pipeline(pipeline)
        plan = build_plan(project.config, check_crons=False)
        run = _Tick(self, project, plan, out, now, pipeline)
        try:
            if dry_run:
                run.dry()
            else:
                run.live()
        finally:
            out.duration_ms = int((time.perf_counter() - t0) * 1000)
        return out.finish()


@dataclass
class _Tick(Recovery):
    """The state of one tick (not reusable)."""

    rec: Reconciler
    project: Project
    plan: SchedulePlan
    out: TickOutput
    now: datetime
    only: str | None
    store: StateStore | None = None
    rows: dict[str, ScheduleRow] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    evaluated_names: list[str] = field(default_factory=list)
    submitted: dict[str, list[Claim]] = field(default_factory=dict)
    budgets: dict[str, int | None] = field(default_factory=dict)
    halted: bool = False

    def __post_init__(self) -> None:
        #: settled when the tick opens the store (a store at an older location is moved then, or is busy)
        self.state_path = Path()
        self.dot_rocky = self.project.dot_rocky
        self.spool = spool_dir_of(self.dot_rocky)
        self.registry = ChildRegistry(self.dot_rocky)

    # ------------------------------------------------------------------ entry points

    def live(self) -> None:
        opts = self.rec.options
        lock = TickLock(
            self.dot_rocky,
            stale_after=opts.stale_after_seconds,
            heartbeat_interval=opts.heartbeat_interval_seconds,
            wall=self.rec.wall,
        )
        try:
            outcome = lock.acquire()
        except OSError as exc:
            raise StateError(f"cannot take the tick lock in {self.dot_rocky}: {exc}") from exc
        if outcome == "in_progress":
            self.out.tick_in_progress = True
            self.out.skipped.append(Skipped(reason="tick_in_progress"))
            return
        try:
            if outcome == "overridden":
                self.out.lock_overridden = True
                w = lock.wedged
                log.warning(
                    "tick lock %s is held by %s with a stale heartbeat (%s, over %.0f s): taking over a "
                    "wedged reconciler; restart the process that holds it",
                    lock.lock_path, holder_text(w.pid if w else None, w.hostname if w else None),
                    age_text(lock.overridden_age), opts.stale_after_seconds,
                )
            try:
                self.state_path = self.project.state_path()
                self.store = StateStore.open(self.state_path, writer=True)
            except StateLockedError as exc:
                # Exit 0 is right (the next tick evaluates it all), but a timer that keeps meeting a busy
                # store must be visible in its logs, not only in the JSON nobody keeps.
                log.warning("skipping this tick (state_busy): %s", exc)
                self.out.skipped.append(Skipped(reason="state_busy"))
                return
            try:
                self._reconcile()
            finally:
                if self.store is not None:
                    self.store.close()
                    self.store = None
        finally:
            lock.release()

    def dry(self) -> None:
        self.state_path = self.project.state_path(reading=True)
        self.store = StateStore.open(self.state_path, writer=False)
        try:
            self._reconcile(dry=True)
        finally:
            self.store.close()
            self.store = None

    # ------------------------------------------------------------------ the tick

    def _reconcile(self, dry: bool = False) -> None:
        assert self.store is not None
        self.rows = ScheduleRepo(self.store).all()
        for claim in ClaimRepo(self.store).submitted():
            self.submitted.setdefault(claim.pipeline, []).append(claim)
        listing = list_demands(self.spool)
        for error in listing.errors:
            # errors[] makes the exit 1; the skip is the published shape of "webhook demand not consumed"
            log.error("%s", error)
            self.out.errors.append(error)
            self.out.skipped.append(Skipped(source="webhook", reason="spool_unreadable", detail=error))
        demands: dict[str, list[Demand]] = {}
        for demand in listing.demands:
            if self.only is not None and demand.pipeline != self.only:
                continue
            if demand.pipeline not in self.plan.pipelines:
                self._removed_pipeline_demand(demand, dry)
            else:
                demands.setdefault(demand.pipeline, []).append(demand)
        names = {pp.name for pp in self.plan.scheduled} | set(demands)
        if self.only is not None:
            names &= {self.only}
        for name in restrict(self.plan, names):
            if self.rec.stop.is_set():
                self.out.interrupted = True
                break
            if self.halted:
                break
            self._pipeline(self.plan.pipelines[name], demands.get(name, []), dry)
        if dry or self.halted:
            return
        self._flush(final=True)
        self._orphan_sweep()
        sweep_markers(self.spool, self.now)

    def _pipeline(self, pp: PipelinePlan, demands: list[Demand], dry: bool) -> None:
        assert self.store is not None
        row = self.rows.get(pp.name) or ScheduleRow(pipeline=pp.name)
        if pp.scheduled and pp.name not in self.rows:
            self.dirty.add(pp.name)
        in_flight = False
        for claim in self.submitted.pop(pp.name, []):
            resolution = resolve_claim(
                self.store, claim, self.rec.clock(), registry=self.registry,
                resolve_after=self.rec.options.resolve_after,
            )
            if resolution is None:
                in_flight = True
            elif dry:
                row = row_after_outcome(row, resolution.outcome, resolution.finished_at, claim.submission_id)
            else:
                row = self._apply_resolution(resolution, row)
        self.rows[pp.name] = row
        decision = decide(
            pp, row, now=self.now, in_flight=in_flight, history=ScheduleRepo(self.store),
            budget=self._budget,
        )
        assert decision.row is not None
        if decision.row_changed:
            self.rows[pp.name] = decision.row
            self.dirty.add(pp.name)
        if pp.scheduled:
            self.evaluated_names.append(pp.name)
        due_source = decision.winner
        logical = rfc3339(decision.logical_ts) if decision.logical_ts else None
        executed = False
        if decision.winner is not None and not dry:
            executed = self._launch_declared(pp, decision)
        for demand in demands:
            entry = self._webhook(pp, demand, in_flight, dry)
            decision.sources.append(entry)
            if entry.reason == "due" and due_source is None:
                due_source, logical = "webhook", rfc3339(demand.accepted_at)
        self.out.evaluated.append(
            Evaluated(
                pipeline=pp.name, due=due_source is not None, due_source=due_source, logical_ts=logical,
                sources=decision.sources,
            )
        )
        self._skips(pp, decision.sources, executed)

    def _skips(self, pp: PipelinePlan, sources: list[SourceEntry], executed: bool) -> None:
        notable = [s for s in sources if s.reason in NOTABLE_REASONS]
        if not notable and not executed and pp.scheduled:
            notable = [s for s in sources if s.reason == "not_due"][:1]
        for s in notable:
            self.out.skipped.append(
                Skipped(
                    pipeline=pp.name, source=s.source, reason=s.reason, resume_at=s.resume_at,
                    missed=s.missed, detail=s.detail,
                )
            )

    # ------------------------------------------------------------------ launching

    def _launch_declared(self, pp: PipelinePlan, decision: Decision) -> bool:
        # Claim timestamps use the clock, not the tick instant: a tick that ran long children before this
        # one must not make the claim look minutes older to the stuck-claim resolver.
        assert self.store is not None and decision.winner is not None and decision.logical_ts is not None
        source = decision.winner
        entry = decision.entry(source)
        assert entry is not None
        if self.rec.stop.is_set():
            self.out.interrupted = True
            return False
        # A cron occurrence is one demand forever; after/freshness demand recurs until the pipeline
        # succeeds (a retry after backoff is a new claim), so its key carries the tick instant.
        key = claim_key(pp.name, source, decision.logical_ts if source == "cron" else self.now)
        expected_anchor = self.rows[pp.name].cron_anchor
        submission_id = uuid.uuid4().hex
        repo = ScheduleRepo(self.store)
        claims = ClaimRepo(self.store)
        with self.store.transaction():
            current = repo.get(pp.name)
            if source == "cron" and current is not None and current.cron_anchor != expected_anchor:
                entry.reason, entry.detail = "dedup", "another reconciler already took this occurrence"
                return False
            if source != "cron" and claims.submitted(pp.name):
                entry.reason = "in_flight"
                return False
            if not claims.submit(
                claim_key=key, pipeline=pp.name, source=source, logical_ts=decision.logical_ts,
                submission_id=submission_id, now=self.rec.clock(),
            ):
                entry.reason, entry.detail = "dedup", f"claim {key} already exists"
                return False
            row = self.rows[pp.name].with_(last_fire=self.now, last_fire_source=source)
            if source == "cron" and decision.cron_fire is not None:
                row = row.with_(
                    cron=pp.cron, timezone=pp.timezone, cron_anchor=decision.cron_fire.new_anchor,
                    next_fire_at=decision.cron_fire.next_fire_at,
                )
            self.rows[pp.name] = row
            self.dirty.add(pp.name)
            self._flush()
        self._run(pp, source, key, decision.logical_ts, submission_id, "schedule")
        return True

    def _webhook(self, pp: PipelinePlan, demand: Demand, in_flight: bool, dry: bool) -> SourceEntry:
        row = self.rows.get(pp.name)
        if not pp.runnable:
            detail = f"pipeline '{pp.name}' is a {pp.pipeline_type} pipeline, which rocky run cannot run"
            if not dry:
                self._finalize_unrunnable(demand, detail)
            return SourceEntry(source="webhook", reason="config_error", detail=detail)
        if row is not None and row.paused:
            return SourceEntry(source="webhook", reason="paused", detail=f"deferred: {demand.demand_uid}")
        if in_flight:
            return SourceEntry(source="webhook", reason="in_flight", detail=f"deferred: {demand.demand_uid}")
        if dry:
            return SourceEntry(source="webhook", reason="due", detail=demand.demand_uid)
        if self.halted or self.store is None:
            return SourceEntry(source="webhook", reason="in_flight", detail="state store busy; deferred")
        if self.rec.stop.is_set():
            self.out.interrupted = True
            return SourceEntry(source="webhook", reason="due", detail=demand.demand_uid)
        assert self.store is not None
        key = webhook_claim_key(demand.demand_uid)
        submission_id = uuid.uuid4().hex
        with self.store.transaction():
            claimed = ClaimRepo(self.store).submit(
                claim_key=key, pipeline=pp.name, source="webhook", logical_ts=demand.accepted_at,
                submission_id=submission_id, now=self.rec.clock(),
            )
            if claimed:
                row = (row or ScheduleRow(pipeline=pp.name)).with_(
                    last_fire=self.now, last_fire_source="webhook"
                )
                self.rows[pp.name] = row
                self.dirty.add(pp.name)
                self._flush()
        # The claim is committed: removing the file now can only lose the demand, never repeat it.
        self._consume(demand)
        if not claimed:
            return SourceEntry(
                source="webhook", reason="dedup", detail=f"demand {demand.demand_uid} already claimed"
            )
        self._run(pp, "webhook", key, demand.accepted_at, submission_id, "webhook")
        return SourceEntry(source="webhook", reason="due", detail=demand.demand_uid)

    def _run(
        self,
        pp: PipelinePlan,
        source: str,
        key: str,
        logical_ts: datetime,
        submission_id: str,
        trigger: Trigger,
    ) -> None:
        """Close the store, run the child (with in-tick retries), reopen, finalize.

        A child stopped by this tick's own shutdown (SIGTERM/SIGINT to the tick, the server's drain) is
        an interruption, not a failure of the pipeline: the tick says ``interrupted`` (exit 130), the
        claim completes with the child's exit code, and neither the failure streak nor the backoff
        moves, nor is an incident written; the demand runs again at its next evaluation.
        """
        attempts = 1
        result = self._spawn(pp, trigger, submission_id, attempts)
        outcome = _outcome(result)
        while (
            outcome == "failure" and attempts <= pp.retry_max and not result.timed_out
            and not result.drained and not self.rec.stop.is_set()
        ):
            if not self._reopen():
                break
            assert self.store is not None
            attempts += 1
            ClaimRepo(self.store).record_attempt(key, attempts, self.rec.clock())
            log.warning("scheduled run of %s failed (exit %s); retry %d of %d", pp.name, result.exit_code,
                        attempts - 1, pp.retry_max)
            result = self._spawn(pp, trigger, submission_id, attempts)
            outcome = _outcome(result)
        executed = Executed(
            pipeline=pp.name, source=source, logical_ts=rfc3339(logical_ts), submission_id=submission_id,
            exit_code=result.exit_code, outcome=outcome, attempts=attempts,
            timed_out=result.timed_out or None,
        )
        self.out.executed.append(executed)
        interrupted = result.drained
        if interrupted:
            self.out.interrupted = True
            log.warning("scheduled run of %s stopped by the shutdown (exit %s); not counted as a failure",
                        pp.name, result.exit_code)
        if not self._reopen():
            log.error(
                "state store %s stayed locked after the run of %s; its claim stays submitted and the next "
                "tick finalizes it from the run record", self.state_path, pp.name,
            )
            self.halted = True
            return
        assert self.store is not None
        finished = self.rec.clock()
        with self.store.transaction():
            ClaimRepo(self.store).complete(key, outcome, result.exit_code, attempts, finished)
            row = self.rows.get(pp.name) or ScheduleRow(pipeline=pp.name)
            if not interrupted:
                row = row_after_outcome(row, outcome, finished, submission_id)
            self.rows[pp.name] = row
            self.dirty.add(pp.name)
            self._flush()
        if outcome != "success" and not interrupted:
            executed.incident = self._incident(
                pp.name, source, outcome, logical_ts, submission_id, result.exit_code, attempts,
                row.consecutive_failures, finished,
            )

    def _spawn(self, pp: PipelinePlan, trigger: Trigger, submission_id: str, attempt: int) -> ChildResult:
        if self.store is not None:
            self.store.close()  # the child is the writer now
            self.store = None
        request = ChildRequest(
            pipeline=pp.name,
            config_path=self.project.config.path,
            state_path=self.state_path,
            trigger=trigger,
            submission_id=submission_id,
            timeout_seconds=pp.timeout_minutes * 60 or None,
            cwd=self.project.root,
            attempt=attempt,
            state_namespace=self.project.state_namespace,
        )
        log.info("running %s (%s, submission %s, attempt %d)", pp.name, trigger, submission_id, attempt)

        def started(pid: int) -> None:
            self.registry.register(submission_id, pid, pp.name, self.rec.clock())

        try:
            return self.rec.spawner.run(request, started)
        finally:
            self.registry.forget(submission_id)

    def _reopen(self) -> bool:
        """Reopen the store after a child; a writer that grabbed it meanwhile is waited out briefly."""
        opts = self.rec.options
        for attempt in range(opts.reopen_attempts):
            try:
                self.store = StateStore.open(self.state_path, writer=True)
                return True
            except StateLockedError:
                if attempt + 1 < opts.reopen_attempts:
                    time.sleep(opts.reopen_pause_seconds)
        return False

    # ------------------------------------------------------------------ helpers

    def _flush(self, final: bool = False) -> None:
        """Write dirty cursors (joins an open transaction); the final flush stamps last_evaluated_at (never
        backwards: a tick replayed with an older ``--now`` does not make the timer look dead)."""
        if self.store is None:
            return
        repo = ScheduleRepo(self.store)
        with self.store.transaction():
            repo.upsert_many(self.rows[n] for n in sorted(self.dirty) if n in self.rows)
            self.dirty.clear()
            if final and self.evaluated_names:
                repo.touch_evaluated(self.evaluated_names, self.now)

    def _budget(self, pp: PipelinePlan) -> int | None:
        if pp.name not in self.budgets:
            self.budgets[pp.name] = freshness_budget(self.project, pp)
        return self.budgets[pp.name]

def _outcome(result: ChildResult) -> Outcome:
    if result.timed_out or result.drained:
        return "failure"
    return outcome_of_exit(result.exit_code)


def tick_project(
    project: Project,
    *,
    spawner: Spawner,
    clock: Callable[[], datetime] = now_utc,
    dry_run: bool = False,
    pipeline: str | None = None,
    options: ReconcilerOptions | None = None,
) -> TickOutput:
    """One tick with a fresh :class:`Reconciler` (the ``rocky tick`` path)."""
    return Reconciler(spawner=spawner, clock=clock, options=options).tick(
        project, dry_run=dry_run, pipeline=pipeline
    )

