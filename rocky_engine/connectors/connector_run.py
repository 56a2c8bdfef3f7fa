"""``rocky load --connector NAME``: one run of a child connector, from the saved state to the next one.

    read state (commit_seq N) -> claim connector:NAME:N -> attempts (fresh scratch each) -> check result
    -> stage -> drift / contract -> promote (one INSERT) -> drop staging -> commit state N + 1

The state store's writer lock is held for the claim, and from just before the promote through the state
commit (one hold: no other writer can come between the promote and the commit, so a busy lock can make
a run fail before the promote, never after it); never while the program runs, so a second run of the same
connector meets the claim (and skips, exit 0) instead of the lock. Each wait for the lock is bounded by
``state_lock_wait_secs``; a run that meets a busy lock fails with a JSON document naming the other writer
(connectors/state_lock.py). On a remote state backend each of those steps downloads
the shared state first (``open_synced_store``), the claim is taken on the backend (atomic across
machines), and the commit uploads the state (conditional on the downloaded generation with ``cas``)
before it finalizes the claim there.

The claim (seeds/child-connectors.md "What Rocky guarantees"):

- failure before the promote (attempts, checks, staging, drift, contract, an interrupt, a claim that
  expired before the promote): the staging relation is dropped and the claim freed (finalized as failed,
  so the next run claims the same key again);
- the promote was sent and failed, or the state commit failed: the claim stays in flight on purpose.
  Until it expires a run with the same key skips; after that the next run adopts it, warns, and loads
  the batch again (at least once, never lost);
- a finished (succeeded) claim while the saved state still says N: the run fails, the state was reset.

Signals (the seed's "Known gaps"): SIGINT / SIGTERM while the program runs stop its group and fail the run;
while Rocky stages, the statement in flight is interrupted and the run stops before the promote; after the
promote was sent, the signal is noted and the state commit still finishes (exit 130, status loaded).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.connectors.fingerprint import ChangedAfterCheck, verify
from rocky_engine.connectors.launch import LaunchSpec, program_env, run_program
from rocky_engine.connectors.limits import claim_ttl_hours
from rocky_engine.connectors.preflight import ConnectorPlan, plan_connector
from rocky_engine.connectors.result import ConnectorResult, read_result
from rocky_engine.connectors.scratch import create_scratch, remove_scratch
from rocky_engine.connectors.state_lock import apply_noted_frees, note_free, open_state_waiting
from rocky_engine.errors import AdapterError, RockyError, StateLockedError
from rocky_engine.logs import get_logger
from rocky_engine.redact import Redactor, known
from rocky_engine.run.load_output import LoadOutput
from rocky_engine.state.connectors import ConnectorStateRepo, claim_key
from rocky_engine.wire.connector import ConnectorRequest, ConnectorState
from rocky_engine.wire.load import ConnectorInfo, LoadedFile

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.connectors.promote import Promoter
    from rocky_engine.project import Project
    from rocky_engine.state.remote.sync import SyncedStore

log = get_logger("connector")

Clock = Callable[[], datetime]


def execute_connector_load(
    project: Project,
    name: str,
    *,
    clock: Clock = lambda: datetime.now(UTC),
    env: Mapping[str, str] | None = None,
) -> LoadOutput:
    """Run connector ``name`` once and return the load document.

    Raises:
        ConfigError: anything :func:`plan_connector` refuses (nothing has started then).
        StateError: the state store cannot be opened or read for the claim.
    """
    from rocky_engine.run.interrupt import InterruptGuard

    t0 = time.perf_counter()
    plan = plan_connector(project, name, os.environ if env is None else env)
    out = LoadOutput(pipeline=name, connector=ConnectorInfo(name=name, egress_hosts=plan.egress_hosts))
    log.info("connector %s: declared egress hosts: %s (stated by the manifest, not enforced)", name,
             ", ".join(plan.egress_hosts) or "none")
    with InterruptGuard() as guard:
        _Run(project, plan, out, clock, guard.stop, guard.on_interrupt).execute()
        if guard.stop.is_set():
            out.interrupted = True
    out.finish()
    out.duration_ms = int((time.perf_counter() - t0) * 1000)
    return out


class _Run:
    """The steps of one run; ``out.connector`` is filled in as they go."""

    def __init__(
        self,
        project: Project,
        plan: ConnectorPlan,
        out: LoadOutput,
        clock: Clock,
        stop: threading.Event,
        on_interrupt: Callable[[Callable[[], None]], None],
    ) -> None:
        assert out.connector is not None
        self.project = project
        self.plan = plan
        self.out = out
        self.info: ConnectorInfo = out.connector
        self.clock = clock
        self.stop = stop
        self.on_interrupt = on_interrupt
        self.run_id = uuid.uuid4().hex
        self.seq = 0
        self.key = ""
        self.claim_expires: datetime | None = None
        self.protected: set[str] = set()
        self.previous_holder: str | None = None
        #: the request's ``state``: None for a new connector
        self.request_state: ConnectorState | None = None
        #: the adapter whose statement a signal interrupts (only while staging)
        self.interruptible: WarehouseAdapter | None = None
        #: True from the claim until the run decided its fate (freed, committed, or left in flight on
        #: purpose after the promote was sent); an unexpected error meanwhile frees it
        self.claim_open = False
        #: the state store held from just before the promote through the state commit
        self.held: SyncedStore | None = None
        self.lock_wait = float(plan.config.state_lock_wait_secs)
        #: perf_counter() when staging began and when the INSERT returned or failed: one INSERT reads every
        #: file of the batch, so this is each file's duration_ms (None: not staged, or not done yet)
        self.staged_at: float | None = None
        self.landed_at: float | None = None

    # ------------------------------------------------------------------ the run

    def execute(self) -> None:
        if not self._claim():
            return
        self.claim_open = True
        try:
            result, scratch = self._attempts(self.request_state)
            if result is None or scratch is None:
                self._free_claim()
                return
            self._load(result, scratch)
        except RockyError as exc:
            # e.g. a scratch directory that cannot be created: a failure before the promote
            self._fail(str(exc))
            if self.claim_open:
                self._free_claim()
        except BaseException:
            if self.claim_open:
                self._free_claim()
            raise
        finally:
            self._release()

    def _release(self) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            held.close()

    def _fail(self, message: str) -> None:
        self.info.status = "failed"
        self.info.error = message
        log.error("connector %s: %s", self.plan.name, message)

    # ------------------------------------------------------------------ state and claim

    def _claim(self) -> bool:
        """Read the saved state and claim the batch; False when the run stops here."""
        plan = self.plan
        # On a remote backend the download brings the shared connector state, and the claim is taken on
        # the backend (atomic across machines); nothing is uploaded here.
        try:
            synced = open_state_waiting(self.project, self.lock_wait, "claim the batch")
        except StateLockedError as exc:
            self._fail(f"{exc.message}; nothing was claimed or run, retry when it is done")
            return False
        with synced as store:
            apply_noted_frees(self.project, synced, self.clock)
            saved = ConnectorStateRepo(store).get(plan.name)
            self.seq = saved.commit_seq if saved is not None else 0
            self.info.commit_seq_before = self.info.commit_seq_after = self.seq
            if saved is not None and saved.schema_version > plan.state_schema_version:
                self._fail(
                    f"the saved state has schema_version {saved.schema_version}, newer than the manifest's "
                    f"state_schema_version {plan.state_schema_version}; refusing to start the program "
                    "(deploy the connector version that wrote it, or reset the state)"
                )
                return False
            self.key = claim_key(plan.name, self.seq)
            ttl = claim_ttl_hours(plan.limits.wall_time_secs, plan.config.retries)
            now = self.clock()
            decision = synced.idempotency.claim(self.key, self.run_id, now=now, ttl_hours=ttl)
            self.claim_expires = now + timedelta(hours=ttl)
            self.protected = ConnectorStateRepo(store).live_claim_run_ids(now) - {self.run_id}
        if decision.outcome == "skipped_in_flight":
            self.info.status = "skipped"
            log.info("connector %s: batch %s is claimed by run %s, still in flight; skipping", plan.name,
                     self.key, decision.skipped_by_run_id)
            return False
        if decision.outcome == "skipped_idempotent":
            self._fail(
                f"batch {self.key} was already finished by run {decision.skipped_by_run_id}, but the saved "
                f"state is still at commit_seq {self.seq}; the state may have been reset or restored. "
                "Check the target table, then remove the claim (`DELETE FROM idempotency_keys WHERE key = "
                f"'{self.key}'` in the state store) to load this batch again"
            )
            return False
        self.previous_holder = decision.previous_run_id
        if decision.adopted:
            self.info.adopted_expired_claim = True
            why = "whose holder is gone from this host" if decision.holder_dead else "that expired"
            log.warning(
                "connector %s: adopted the in-flight claim %s of run %s, %s; that run may have loaded "
                "this batch already, so it may load twice (at-least-once delivery)",
                plan.name, self.key, decision.previous_run_id, why,
            )
        if saved is not None:
            self.request_state = ConnectorState(schema_version=saved.schema_version, value=saved.value)
        return True

    def _free_claim(self) -> None:
        self.claim_open = False
        try:
            if self.held is not None:
                self.held.idempotency.finalize(self.key, self.run_id, False, self.clock())
                return
            synced = open_state_waiting(self.project, self.lock_wait, "free the claim")
            with synced:
                synced.idempotency.finalize(self.key, self.run_id, False, self.clock())
        except StateLockedError as exc:
            noted = note_free(self.project, self.key, self.run_id)
            log.warning("connector %s: could not free claim %s: %s; %s", self.plan.name, self.key,
                        exc.message, "the next connector run frees it" if noted else "it expires by itself")
        except RockyError as exc:
            log.error("connector %s: could not free claim %s (%s); it expires by itself", self.plan.name,
                      self.key, exc)

    # ------------------------------------------------------------------ attempts

    def _attempts(self, state: ConnectorState | None) -> tuple[ConnectorResult | None, Path | None]:
        plan = self.plan
        total = plan.config.retries + 1
        redact = known().merged(Redactor(plan.secrets))
        last = "no attempt ran"
        for attempt in range(1, total + 1):
            if self.stop.is_set():
                break
            self.info.attempts = attempt
            scratch = create_scratch(plan.output_dir, self.run_id, attempt)
            created = os.lstat(scratch)
            request = ConnectorRequest(
                run_id=self.run_id, output_dir=str(scratch), state=state, limits=plan.limits.request(),
            )
            spec = LaunchSpec(
                argv=plan.argv,
                scratch=scratch,
                env=program_env(plan.parent_env, plan.secrets, self.run_id, scratch),
                request=json.dumps(request.wire()).encode("utf-8") + b"\n",
                limits=plan.limits,
                redact=redact,
                label=plan.name,
            )
            log.info("connector %s: attempt %d of %d in %s", plan.name, attempt, total, scratch)
            outcome = run_program(spec, self.stop)
            if outcome.succeeded:
                try:
                    result = read_result(scratch, state_schema_version=plan.state_schema_version,
                                         output_bytes=plan.limits.output_bytes,
                                         identity=(created.st_dev, created.st_ino))
                except RockyError as exc:
                    last = f"the result was refused: {exc}"
                else:
                    log.info("connector %s: attempt %d produced %d file(s), %d rows, %d bytes", plan.name,
                             attempt, len(result.files), result.total_rows, result.total_bytes)
                    return result, scratch
            else:
                last = outcome.describe(plan.limits)
            log.warning("connector %s: attempt %d of %d failed: %s", plan.name, attempt, total, last)
            remove_scratch(scratch)
            if outcome.stopped == "interrupted":
                break
        if self.stop.is_set():
            when = f"while the program ran (attempt {self.info.attempts})" if self.info.attempts else \
                "before the program started"
            self._fail(f"interrupted {when}; the claim was freed")
        else:
            self._fail(f"all {total} attempt(s) failed; the last one: {last}")
        return None, None

    # ------------------------------------------------------------------ load and commit

    def _load(self, result: ConnectorResult, scratch: Path) -> None:
        plan = self.plan
        table = plan.config.target.table
        rows = 0
        if result.files:
            promoted = self._stage_and_promote(result)
            if promoted is None:
                return
            rows = promoted
        else:
            if self.previous_holder is not None:
                self._drop_leftovers_only()
            try:
                self._hold_state()
            except StateLockedError as exc:
                self._fail(f"{exc.message}; nothing was loaded and the saved state is unchanged, the claim "
                           "was freed")
                self._free_claim()
                return
        committed = self._commit(result)
        self._report(result, error=None, loaded=True)
        if not committed:
            if result.files:
                log.error("connector %s: the batch is in %s but the state did not move; its scratch "
                          "directory %s is kept", plan.name, plan.config.target.full_name, scratch)
            return
        if rows != result.total_rows:
            log.warning("connector %s: the INSERT reported %d rows, the files hold %d", plan.name, rows,
                        result.total_rows)
        self.info.status = "loaded"
        log.info("connector %s: loaded %d rows into %s.%s; commit_seq %d -> %d", plan.name,
                 result.total_rows, plan.config.target.schema_, table, self.seq, self.info.commit_seq_after)
        if not plan.config.keep_scratch:
            remove_scratch(scratch)

    def _report(self, result: ConnectorResult, *, error: str | None, loaded: bool) -> None:
        target = self.plan.config.target
        duration_ms = self._batch_ms()
        for f in result.files:
            if loaded and error is None:
                self.out.add(LoadedFile(path=f.path, table=target.table, target=target.full_name, rows=f.rows,
                                        bytes=f.bytes, duration_ms=duration_ms))
            else:
                self.out.add(LoadedFile(path=f.path, table=target.table, target=target.full_name,
                                        error=error or "not loaded", duration_ms=duration_ms))

    def _batch_ms(self) -> int:
        """The batch's time from staging to the end of its INSERT (to now while that has not ended)."""
        if self.staged_at is None:
            return 0
        end = self.landed_at if self.landed_at is not None else time.perf_counter()
        return int((end - self.staged_at) * 1000)

    def _stage_and_promote(self, result: ConnectorResult) -> int | None:
        """Stage and promote; the rows appended, or None when the run failed (claim handled)."""
        from rocky_engine.adapters import open_adapter
        from rocky_engine.connectors.promote import Promoter

        plan = self.plan
        try:
            adapter = open_adapter(self.project.config, plan.config.target.adapter, retry=False)
        except RockyError as exc:
            self._failed_before_promote(result, None, f"cannot open the target warehouse: {exc}")
            return None
        promoter = Promoter(adapter, plan.config.target, self.run_id)
        self.interruptible = adapter
        self.on_interrupt(self._interrupt_staging)
        try:
            self._drop_leftovers(promoter)
            self.staged_at = time.perf_counter()
            try:
                self._check_stop()
                promoter.stage(result.files)
                self._check_stop()
                promoter.check(plan.contract, result.total_rows)
                self._check_stop()
                drift = promoter.prepare_target()
                self._hold_state()  # held through the state commit
                for f in result.files:  # the last look at the files before the promote reads them
                    verify(f.path, f.absolute, f.fingerprint, "before the promote")
                self._check_claim_alive()
                self._check_stop()  # the last look before the promote
            except RockyError as exc:
                self._failed_before_promote(result, promoter, self._staging_error(exc))
                return None
            # From here a signal no longer interrupts anything: the promote and the commit finish, and
            # the claim stays in flight unless the state commit closes it.
            self.interruptible = None
            self.claim_open = False
            if drift:
                log.info("connector %s: drift handled: %s", plan.name, "; ".join(drift))
            try:
                rows = promoter.promote()
            except RockyError as exc:
                self.landed_at = time.perf_counter()
                message = (f"the promote failed: {exc}; some rows may already be in the table, so the claim "
                           f"{self.key} stays in flight until it expires (the batch then loads again)")
                self._drop(promoter)
                self._fail(message)
                self._report(result, error=message, loaded=False)
                return None
            self.landed_at = time.perf_counter()
            self._drop(promoter)
            log.info("connector %s: promoted %d rows into %s; committing the state", plan.name, rows,
                     plan.config.target.full_name)
            return rows
        finally:
            self.interruptible = None
            adapter.close()

    def _hold_state(self) -> None:
        """Take the state writer for the promote and the commit (bounded wait).

        Raises:
            StateLockedError: another writer still holds it after ``state_lock_wait_secs``.
        """
        self.held = open_state_waiting(self.project, self.lock_wait, "promote the batch and commit the state")

    def _drop_leftovers(self, promoter: Promoter) -> None:
        try:
            promoter.drop_leftovers(self.protected)
        except RockyError as exc:
            log.warning("connector %s: could not drop leftover staging relations: %s", self.plan.name, exc)

    def _drop_leftovers_only(self) -> None:
        """A batch with no files after a failed or crashed run: only clean up what that run left."""
        from rocky_engine.adapters import open_adapter
        from rocky_engine.connectors.promote import Promoter

        try:
            adapter = open_adapter(self.project.config, self.plan.config.target.adapter, retry=False)
        except RockyError as exc:
            log.warning("connector %s: could not open the target to drop leftover staging relations: %s",
                        self.plan.name, exc)
            return
        try:
            self._drop_leftovers(Promoter(adapter, self.plan.config.target, self.run_id))
        finally:
            adapter.close()

    def _interrupt_staging(self) -> None:
        adapter = self.interruptible
        if adapter is not None:
            adapter.interrupt()

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise _Stopped("interrupted while staging the batch; stopped before the promote")

    def _check_claim_alive(self) -> None:
        if self.claim_expires is not None and self.clock() >= self.claim_expires:
            raise _Stopped(
                f"the claim {self.key} expired before the promote (another run may have adopted it); "
                "stopped before the promote"
            )

    def _staging_error(self, exc: RockyError) -> str:
        if self.stop.is_set() and not isinstance(exc, _Stopped):
            return "interrupted while staging the batch; stopped before the promote"
        message = exc.message if isinstance(exc, AdapterError) else str(exc)
        if isinstance(exc, (_Stopped, ChangedAfterCheck, StateLockedError)):
            return message
        return f"staging the batch failed: {message}"

    def _failed_before_promote(self, result: ConnectorResult, promoter: Promoter | None,
                               message: str) -> None:
        if promoter is not None:
            self._drop(promoter)
        self._fail(message + "; the target's rows and the saved state are unchanged, the claim was freed")
        self._report(result, error=message, loaded=False)
        self._free_claim()

    def _drop(self, promoter: Promoter) -> None:
        try:
            promoter.drop_staging()
        except RockyError as exc:
            log.warning("connector %s: could not drop staging %s: %s (the next run drops it)", self.plan.name,
                        promoter.staging_rel, exc)

    def _commit(self, result: ConnectorResult) -> bool:
        plan = self.plan
        self.claim_open = False  # the commit closes it, or a failed commit leaves it in flight on purpose
        try:
            synced, self.held = self.held, None
            if synced is None:
                raise RuntimeError("the state commit runs under the lock taken before the promote")
            with synced as store:
                # the fence compares with the state as downloaded now, not as read at the claim
                now = self.clock()
                new_seq = ConnectorStateRepo(store).commit(
                    plan.name,
                    expected_seq=self.seq,
                    schema_version=result.state_schema_version,
                    value_json=result.state_json,
                    run_id=self.run_id,
                    now=now,
                )
                # With cas the upload is conditional on the downloaded generation, so the fence holds
                # atomically; a lost race raises and the claim stays in flight.
                synced.upload()
                status = synced.status
                if status is None or status.uploaded:
                    synced.idempotency.finalize(self.key, self.run_id, True, now)
                else:
                    log.warning("connector %s: the state was committed locally but not uploaded; the claim "
                                "%s stays in flight on the backend, so after it expires the batch loads "
                                "again", plan.name, self.key)
        except RockyError as exc:
            self._fail(
                f"the state commit failed: {exc}. The batch is in the target but the state did not move; "
                f"the claim {self.key} stays in flight until it expires, then the next run loads the batch "
                "again"
            )
            return False
        self.info.commit_seq_after = new_seq
        return True


class _Stopped(RockyError):
    """The run stops before the promote (a signal, or a claim that expired)."""

