"""``[checks]`` on a transformation run (CONTRACT section 1: every pipeline type takes ``[checks]``).

After the DAG, every model materialized as a table in this run (not a view, never an ephemeral model) is
checked on one session, in DAG order: ``rocky_engine.checks.table_checks`` with the model's target as the
table (no source, so row_count reports the count and column_match does not apply; freshness reads the
model's ``timestamp_column``). Exit-code semantics are those of replication runs: with ``fail_on_error``
(the default) a failed error-severity check makes an otherwise successful run ``PartialFailure`` (exit 2,
``check_gate_failed: true``); warning-severity failures and anomalies are advisory. A pipeline without
checks never reaches this module, so it costs nothing per model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocky_engine.checks.history import all_records
from rocky_engine.checks.table_checks import CheckTarget, TableCheckOutcome, run_table_checks
from rocky_engine.config.checks import ChecksConfig
from rocky_engine.errors import HookAbort
from rocky_engine.run.output import RunOutput
from rocky_engine.wire.run import TableError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import TableName, WarehouseAdapter
    from rocky_engine.run.context import RunContext


def checks_active(checks: ChecksConfig) -> bool:
    """Whether ``[checks]`` asks for anything at all (an empty or disabled table means no work)."""
    return checks.enabled and bool(
        checks.row_count or checks.column_match.enabled or checks.freshness or checks.null_rate
        or checks.custom or checks.assertions
    )


@dataclass(frozen=True)
class CheckedModel:
    """A model built as a table in this run, to be checked."""

    model: str
    target: TableName
    #: the column freshness reads (the model strategy's ``timestamp_column``); None: no freshness
    timestamp_column: str | None


def run_model_checks(
    ctx: RunContext, session: WarehouseAdapter, models: list[CheckedModel], out: RunOutput
) -> None:
    """Check ``models`` with the pipeline's ``[checks]`` and fold the results into ``out``.

    Fires ``before_checks``, ``check_result`` (per checked table), ``anomaly_detected`` and ``after_checks``;
    writes ``check_history`` in one batch. ``out.status`` must already reflect the models' own outcome.
    """
    checks: ChecksConfig = ctx.pipeline.checks
    if not models:
        return
    try:
        ctx.events.fire("before_checks", metadata={"tables": len(models)})
    except HookAbort as exc:
        # The models are built and recorded; an abort here stops only the checks, and says so.
        ctx.log.error("checks not run: %s", exc)
        out.errors.append(TableError(asset_key=[], error=f"checks not run: {exc}", failure_kind="unknown",
                                     cause="hook-abort"))
        if out.status == "Success":
            out.status = "PartialFailure"
        return
    if checks.freshness is not None and not any(m.timestamp_column for m in models):
        ctx.log.warning(
            "freshness is configured but no built model names a timestamp_column in its [strategy]; "
            "freshness skipped"
        )
    baseline = ctx.store.checks.row_count_baseline
    outcomes: list[tuple[str, TableCheckOutcome]] = []
    for item in models:
        if ctx.guard.stop.is_set():
            break
        key = item.target.full_name
        outcome = run_table_checks(
            session,
            checks,
            CheckTarget(
                asset_key=item.target.asset_key,
                table_key=key,
                qualified=item.target.qualified,
                source_qualified=None,
                source_session=None,
                timestamp_column=item.timestamp_column,
                dialect=session.dialect,
            ),
            baseline=baseline,
            now=ctx.clock(),
        )
        if not outcome.result.checks:
            continue  # e.g. only assertions on other models: nothing to report for this one
        outcomes.append((key, outcome))
        _report(ctx, item, outcome, out)
    if outcomes:
        ctx.store.checks.record_many(all_records(ctx.run_id, outcomes), now=ctx.clock())
    failed = sum(1 for _, o in outcomes if o.failed())
    ctx.events.fire("after_checks", metadata={"tables": len(outcomes), "failed": failed})
    gate = [key for key, o in outcomes if o.error_failed()]
    if gate and checks.fail_on_error:
        out.check_gate_failed = True
        if out.status == "Success":
            out.status = "PartialFailure"
        ctx.log.error("check gate: an error-severity check failed on %d built model(s): %s",
                      len(gate), ", ".join(gate[:5]))


def _report(ctx: RunContext, item: CheckedModel, outcome: TableCheckOutcome, out: RunOutput) -> None:
    key = item.target.full_name
    out.check_results.append(outcome.result)
    out.anomalies.extend(outcome.anomalies)
    failed = outcome.failed()
    for check in failed:
        level = ctx.log.error if check.severity == "error" else ctx.log.warning
        level("check %s failed on model %s (%s)%s", check.name, item.model, key,
              f": {check.error}" if check.error else "")
    ctx.stream.checks("model", item.model, item.target.asset_key, outcome.result.checks)
    ctx.events.fire("check_result", model=item.model, table=key, metadata=outcome.event_metadata())
    for anomaly in outcome.anomalies:
        ctx.stream.anomaly("model", item.model, item.target.asset_key, anomaly)
        ctx.events.fire("anomaly_detected", model=item.model, table=key, metadata=anomaly.wire())
