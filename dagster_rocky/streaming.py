"""Engine events to Dagster events, as they arrive: ``RockyRunStream`` (what ``run_streaming`` returns).

A ``rocky run --output json`` writes one ``rocky.events`` JSON line on stderr per finished model, table,
check, drift action or anomaly (``RunEvent``, ``rocky_engine.wire.events``). The stream reads the child's
stderr line by line (``_process.stream_cli``) and turns each event into a ``MaterializeResult``,
``AssetCheckResult`` or ``AssetObservation`` the moment it is read; every other line goes to the step log.
When the process exits, the JSON document on stdout is the authority: what it reports that no event did
(an older engine, a lost line) is yielded then, and its errors decide the step's outcome.

Rules: one materialization per key, one result per check key, nothing for a key the step did not select
or a check it did not declare, no result for a check the run did not evaluate, and no materialization for
a key that failed. ``dagster/row_count`` is the row count of the target after the run (the event's
``row_count``); the rows this run wrote are ``rocky/rows_copied``. A ``materialized`` event carries the
document's materialization (strategy, watermark, target, column count ...), so an event's
materialization and the document's have the same metadata (one builder, ``materialization_metadata``),
over the facts ``rocky dag`` knows before the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from pydantic import ValidationError

from dagster_rocky import _process
from dagster_rocky.check_names import ANOMALY_CHECK, dagster_check_name
from dagster_rocky.types import (
    EVENTS_TARGET,
    CheckResult,
    DagNode,
    MaterializationInfo,
    MaterializationMetadata,
    RunEvent,
    RunResult,
    TableError,
)
from rocky_engine.wire.metadata import (
    DRIFT,
    FINISHED_AT,
    anomaly_metadata,
    check_metadata,
    drift_entry,
    materialization_metadata,
    row_counts_after_run,
)

DagsterEvent = dg.MaterializeResult[Any] | dg.AssetCheckResult | dg.AssetObservation


@dataclass
class EventRouting:
    """Which Dagster key an engine asset key is, and what the step may report.

    Args:
        keys: engine asset key path -> Dagster key; None: the engine key is the Dagster key.
        selected: the keys the step materializes; None: every key it resolves.
        checks: the check keys the step declared and selected; None: any check of a selected key.
        facts: per-key metadata known before the run (target table, strategy ... from ``rocky dag``),
            added to an event's materialization (an event carries only what the run measured).
    """

    keys: Mapping[tuple[str, ...], dg.AssetKey] | None = None
    selected: set[dg.AssetKey] | None = None
    checks: set[dg.AssetCheckKey] | None = None
    facts: Mapping[dg.AssetKey, Mapping[str, Any]] | None = None

    def key(self, engine_key: list[str]) -> dg.AssetKey | None:
        if not engine_key:
            return None
        key = dg.AssetKey(engine_key) if self.keys is None else self.keys.get(tuple(engine_key))
        if key is None or (self.selected is not None and key not in self.selected):
            return None
        return key

    def check_allowed(self, check_key: dg.AssetCheckKey) -> bool:
        return self.checks is None or check_key in self.checks


@dataclass(frozen=True)
class FailedAsset:
    """One selected asset the run failed to materialize."""

    key: dg.AssetKey
    error: str
    failure_kind: str = "unknown"
    cooldown_seconds: int | None = None


@dataclass
class _Ledger:
    """What the stream has reported so far (so the final document adds only what is missing)."""

    materialized: set[dg.AssetKey] = field(default_factory=set)
    checks: set[dg.AssetCheckKey] = field(default_factory=set)
    failed: dict[dg.AssetKey, FailedAsset] = field(default_factory=dict)
    #: drift seen before the asset's materialization: added to its metadata
    pending_drift: dict[dg.AssetKey, list[dict[str, Any]]] = field(default_factory=dict)
    #: when each Dagster event was handed on (monotonic seconds): what the streaming test measures
    event_times: list[float] = field(default_factory=list)


def parse_event_line(line: str) -> RunEvent | None:
    """The ``RunEvent`` of one stderr line, or None for any other line (plain logs, other targets)."""
    if not line.startswith("{") or EVENTS_TARGET not in line:
        return None
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("target") != EVENTS_TARGET:
        return None
    try:
        return RunEvent.model_validate(doc)
    except ValidationError:
        return None  # an event this version cannot read: the final document still reports it


class RockyRunStream:
    """One streaming ``rocky run``: iterate it for Dagster events as the engine reports them.

    ``yield from rocky.run_streaming(context, ...)`` in an asset body. After the iteration, ``result`` is
    the run's ``RunResult`` and ``failed`` the selected assets that failed. For code written against the
    published ``dagster-rocky`` (where ``run_streaming`` returned the ``RunResult``), any ``RunResult``
    attribute read on the stream (``stream.materializations``) runs it to the end first and reads the result.
    """

    def __init__(
        self,
        lines: Generator[str, None, _process.CliOutcome],
        *,
        finish: Callable[[_process.CliOutcome], RunResult],
        routing: EventRouting,
        log_line: Callable[[str], None] | None = None,
        pipeline: str | None = None,
    ) -> None:
        self._lines = lines
        #: the run's pipeline (``rocky/pipeline``): as asked for, else as the events name it
        self._pipeline = pipeline
        self._finish = finish
        self._routing = routing
        self._log_line = log_line
        self._ledger = _Ledger()
        self._result: RunResult | None = None
        self._iterated = False

    # --- the published-API face ---------------------------------------------------------------------

    @property
    def result(self) -> RunResult:
        """The run's document (runs the stream to the end, discarding events, if nobody iterated it)."""
        if self._result is None:
            for _ in self:
                pass
        assert self._result is not None
        return self._result

    @property
    def failed(self) -> dict[dg.AssetKey, FailedAsset]:
        return self._ledger.failed

    @property
    def event_times(self) -> list[float]:
        return self._ledger.event_times

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the stream does not have: RunResult fields (published compatibility).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.result, name)

    # --- the events ---------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[DagsterEvent]:
        if self._iterated:
            raise RuntimeError("a RockyRunStream can be iterated once")
        self._iterated = True
        while True:
            try:
                line = next(self._lines)
            except StopIteration as done:
                outcome: _process.CliOutcome = done.value
                break
            event = parse_event_line(line)
            if event is None:
                if self._log_line is not None:
                    try:
                        self._log_line(line)
                    except Exception:  # a logging problem must never break the run it reports on
                        pass
                continue
            for out in self._from_event(event):
                self._ledger.event_times.append(time.monotonic())
                yield out
        self._result = self._finish(outcome)
        yield from self._from_document(self._result)

    def _from_event(self, event: RunEvent) -> Iterator[DagsterEvent]:
        self._pipeline = self._pipeline or event.pipeline
        key = self._routing.key(event.asset_key)
        if key is None:
            return
        ledger = self._ledger
        if event.event == "failed":
            ledger.failed[key] = FailedAsset(key=key, error=event.error or event.message)
        elif event.event == "materialized":
            if key in ledger.materialized or key in ledger.failed:
                return
            ledger.materialized.add(key)
            yield dg.MaterializeResult(asset_key=key, metadata=self._event_metadata(key, event))
        elif event.event == "check" and event.check is not None:
            check = event.check
            name = dagster_check_name(check.name, check.kind)
            check_key = dg.AssetCheckKey(key, name)
            if check_key in ledger.checks or not self._routing.check_allowed(check_key):
                return
            ledger.checks.add(check_key)
            details: dict[str, Any] = dict(check.details)
            if not details:  # an engine whose events carry no details: what the event summarises it by
                details = {"kind": check.kind, "observed": check.observed, "expected": check.expected,
                           "detail": check.detail}
            yield check_outcome(check_key, check.passed, check.severity, details, description=check.detail)
        elif event.event == "drift" and event.drift is not None:
            if key not in ledger.materialized:
                ledger.pending_drift.setdefault(key, []).append(drift_entry(event.drift))
            yield observation(key, event)
        elif event.event == "anomaly" and event.anomaly is not None:
            yield observation(key, event)
            check_key = dg.AssetCheckKey(key, ANOMALY_CHECK)
            if check_key not in ledger.checks and self._routing.check_allowed(check_key):
                ledger.checks.add(check_key)
                yield dg.AssetCheckResult(
                    asset_key=key,
                    check_name=ANOMALY_CHECK,
                    passed=False,
                    severity=dg.AssetCheckSeverity.WARN,  # advisory: an anomaly never fails a run
                    metadata=anomaly_metadata(event.anomaly),
                    description=event.anomaly.reason or None,
                )

    def _event_metadata(self, key: dg.AssetKey, event: RunEvent) -> dict[str, Any]:
        # the event carries what the document's materialization does: one builder for both
        mat = MaterializationInfo.model_construct(
            asset_key=event.asset_key, duration_ms=event.duration_ms or 0, rows_copied=event.rows_copied,
            started_at=event.started_at, metadata=event.metadata or MaterializationMetadata(),
        )
        built = materialization_metadata(
            mat, event.run_id, event.row_count, pipeline=event.pipeline, finished_at=event.ts
        )
        return self._dagster_metadata(key, built)

    def _dagster_metadata(self, key: dg.AssetKey, built: dict[str, Any]) -> dict[str, Any]:
        """The builder's metadata over the key's facts, as Dagster values."""
        facts = (self._routing.facts or {}).get(key)
        meta: dict[str, Any] = {**facts, **built} if facts else built
        finished = meta.get(FINISHED_AT)
        if finished is not None:
            meta[FINISHED_AT] = dg.MetadataValue.timestamp(finished)
        drift = self._ledger.pending_drift.pop(key, None)
        if drift:
            meta[DRIFT] = dg.MetadataValue.json(drift)
        return meta

    def _from_document(self, result: RunResult) -> Iterator[DagsterEvent]:
        """What the final document reports that no event did; its errors mark assets failed."""
        ledger = self._ledger
        for err in result.errors:
            key = self._routing.key(err.asset_key)
            if key is not None:
                ledger.failed[key] = _failed(key, err)
        counts = row_counts_after_run(result.check_results)
        latest: dict[dg.AssetKey, MaterializationInfo] = {}
        for mat in result.materializations:
            key = self._routing.key(mat.asset_key)
            if key is not None and key not in ledger.failed:
                latest[key] = mat  # the engine retried a table: its last report wins
        for key, mat in latest.items():
            if key in ledger.materialized:
                continue
            ledger.materialized.add(key)
            built = materialization_metadata(
                mat, result.run_id, counts.get(tuple(mat.asset_key)), pipeline=self._pipeline
            )
            yield dg.MaterializeResult(asset_key=key, metadata=self._dagster_metadata(key, built))
        for table in result.check_results:
            key = self._routing.key(table.asset_key)
            if key is None or key in ledger.failed:
                continue
            for check in table.checks:
                name = dagster_check_name(check.name, getattr(check, "kind", None))
                check_key = dg.AssetCheckKey(key, name)
                if check_key in ledger.checks or not self._routing.check_allowed(check_key):
                    continue
                ledger.checks.add(check_key)
                yield check_result(check_key, check)


def observation(key: dg.AssetKey, event: RunEvent) -> dg.AssetObservation:
    """A drift or anomaly event as Dagster's observation of ``key`` (streaming and Pipes alike)."""
    if event.drift is not None:
        drift = event.drift
        because = f" ({drift.reason})" if drift.reason else ""
        return dg.AssetObservation(
            asset_key=key,
            description=f"schema drift: {drift.action}{because}",
            metadata={
                "rocky/drift_action": drift.action,
                "rocky/drift_reason": drift.reason,
                "rocky/drift_columns": dg.MetadataValue.json(drift.columns),
                "rocky/run_id": event.run_id,
            },
        )
    assert event.anomaly is not None, "an observation is a drift or an anomaly event"
    return dg.AssetObservation(
        asset_key=key,
        description=f"row count anomaly: {event.anomaly.reason}",
        metadata=anomaly_metadata(event.anomaly),
    )


def _failed(key: dg.AssetKey, err: TableError) -> FailedAsset:
    return FailedAsset(
        key=key, error=err.error, failure_kind=err.failure_kind, cooldown_seconds=err.cooldown_seconds
    )


def node_facts(node: DagNode) -> dict[str, Any]:
    """What ``rocky dag`` knows of a node before it runs, under the keys the run document uses."""
    facts: dict[str, Any] = {}
    if node.target is not None:
        name = f"{node.target.catalog}.{node.target.schema_}.{node.target.table}"
        facts["target_table_full_name"] = facts["dagster/table_name"] = name
    if node.strategy is not None:
        facts["strategy"] = node.strategy.type
    if node.sql_hash:
        facts["sql_hash"] = node.sql_hash
    return facts


def check_result(check_key: dg.AssetCheckKey, check: CheckResult) -> dg.AssetCheckResult:
    """A check result of the run document as Dagster's result."""
    return check_outcome(check_key, check.passed, check.severity, check_metadata(check))


def check_outcome(
    check_key: dg.AssetCheckKey,
    passed: bool,
    severity: str,
    details: Mapping[str, Any],
    description: str | None = None,
) -> dg.AssetCheckResult:
    """One builder for a check's Dagster result, from its event or from the document: the same check
    gets the same metadata (its severity and measured details) whichever of the two reported it."""
    metadata: dict[str, Any] = {"severity": severity}
    for name, value in details.items():
        if value is not None:
            metadata[name] = dg.MetadataValue.json(value) if isinstance(value, dict | list) else value
    warn = severity.lower().startswith("warn")  # the rule of wire.metadata.dagster_severity
    return dg.AssetCheckResult(
        asset_key=check_key.asset_key,
        check_name=check_key.name,
        passed=passed,
        severity=dg.AssetCheckSeverity.WARN if warn else dg.AssetCheckSeverity.ERROR,
        metadata=metadata,
        description=description,
    )
