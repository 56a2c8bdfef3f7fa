"""Recovery and bookkeeping side of a tick: stuck claims, the orphan sweep, unrunnable webhook demands,
incident bundles.

A mixin of the reconciler's per-tick object (``reconciler._Tick``): the attributes declared below are the
tick's state. Kept apart from evaluation and launching because it is the path that runs when something
went wrong earlier (a dead reconciler, a removed pipeline), not the path that decides what runs now.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.logs import get_logger
from rocky_engine.schedule.claim_lifecycle import (
    ChildRegistry,
    Resolution,
    resolve_claim,
    row_after_outcome,
    webhook_claim_key,
)
from rocky_engine.schedule.plan import SchedulePlan
from rocky_engine.schedule.spool import Demand, SpoolError, consume
from rocky_engine.schedule.tick_output import TickOutput
from rocky_engine.state.schedule import ScheduleRow
from rocky_engine.state.schedule_claims import Claim, ClaimRepo, Outcome
from rocky_engine.state.store import StateStore
from rocky_engine.wire.tick import Skipped

if TYPE_CHECKING:
    from rocky_engine.project import Project
    from rocky_engine.schedule.reconciler import Reconciler

log = get_logger("schedule")


class Recovery:
    """Methods of a tick that finalize what an earlier tick left behind, and record incidents."""

    rec: Reconciler
    project: Project
    plan: SchedulePlan
    out: TickOutput
    now: datetime
    store: StateStore | None
    rows: dict[str, ScheduleRow]
    dirty: set[str]
    submitted: dict[str, list[Claim]]
    dot_rocky: Path
    spool: Path
    registry: ChildRegistry

    def _flush(self, final: bool = False) -> None:  # provided by the tick
        raise NotImplementedError

    def _apply_resolution(self, res: Resolution, row: ScheduleRow) -> ScheduleRow:
        assert self.store is not None
        claim = res.claim
        # The child's pid file outlived the tick that wrote it (that tick died): the claim is settled
        # now, so nothing will ever read it again.
        self.registry.forget(claim.submission_id)
        with self.store.transaction():
            if not ClaimRepo(self.store).complete(claim.claim_key, res.outcome, None, None, self.now):
                return row
            known = claim.pipeline in self.rows or claim.pipeline in self.plan.pipelines
            if known:
                row = row_after_outcome(row, res.outcome, res.finished_at, claim.submission_id)
                self.rows[claim.pipeline] = row
                self.dirty.add(claim.pipeline)
                self._flush()
        how = f"run {res.run_id}" if res.run_id else "no run record, child gone"
        log.warning(
            "resolved claim %s left submitted by an earlier tick: %s (%s)", claim.claim_key, res.outcome, how
        )
        if res.outcome != "success":
            self._incident(
                claim.pipeline, claim.source, res.outcome, claim.logical_ts, claim.submission_id, None,
                claim.attempts, row.consecutive_failures if known else None, self.now, res.run_id,
            )
        return row

    def _orphan_sweep(self) -> None:
        assert self.store is not None
        for claims in self.submitted.values():
            for claim in claims:
                res = resolve_claim(
                    self.store, claim, self.rec.clock(), registry=self.registry,
                    resolve_after=self.rec.options.resolve_after,
                )
                if res is not None:
                    row = self.rows.get(res.claim.pipeline) or ScheduleRow(pipeline=res.claim.pipeline)
                    self._apply_resolution(res, row)
        self.submitted.clear()
        self._flush()

    def _removed_pipeline_demand(self, demand: Demand, dry: bool) -> None:
        detail = (
            f"webhook demand {demand.demand_uid} names pipeline '{demand.pipeline}', which is no longer in "
            "the config; finalized without running"
        )
        self.out.skipped.append(
            Skipped(pipeline=demand.pipeline, source="webhook", reason="config_error", detail=detail)
        )
        if not dry:
            self._finalize_unrunnable(demand, detail)

    def _finalize_unrunnable(self, demand: Demand, detail: str) -> None:
        assert self.store is not None
        key = webhook_claim_key(demand.demand_uid)
        claims = ClaimRepo(self.store)
        with self.store.transaction():
            claims.submit(
                claim_key=key, pipeline=demand.pipeline, source="webhook", logical_ts=demand.accepted_at,
                submission_id=uuid.uuid4().hex, now=self.now, attempts=0,
            )
            claims.release(key, self.now)
        log.error("%s", detail)
        self._consume(demand)

    def _consume(self, demand: Demand) -> None:
        try:
            consume(self.spool, demand, self.now)
        except SpoolError as exc:
            log.error("%s", exc)
            self.out.errors.append(str(exc))

    def _incident(
        self,
        pipeline: str,
        source: str,
        outcome: Outcome,
        logical_ts: datetime | None,
        submission_id: str,
        exit_code: int | None,
        attempts: int | None,
        consecutive_failures: int | None,
        recorded_at: datetime,
        run_id: str | None = None,
    ) -> str | None:
        # Imported here: only a failed or partial run writes one, and a quiet tick never does.
        from rocky_engine.schedule.incidents import (
            INCIDENTS_DIR,
            IncidentBundle,
            pointers_for,
            record_incident,
        )

        bundle = IncidentBundle(
            recorded_at=recorded_at,
            pipeline=pipeline,
            source=source,
            outcome=outcome,
            logical_ts=logical_ts,
            submission_id=submission_id,
            exit_code=exit_code,
            attempts=attempts,
            consecutive_failures=consecutive_failures,
            pointers=pointers_for(
                config_path=self.project.config.path, submission_id=submission_id,
                since=logical_ts or recorded_at, resident=self.rec.options.resident, run_id=run_id,
            ),
        )
        return record_incident(self.dot_rocky / INCIDENTS_DIR, bundle)
