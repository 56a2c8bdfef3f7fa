"""Report a run to Dagster Pipes when the engine was launched under a Pipes session: each materialization,
check, drift action and anomaly as it happens (``run.events`` calls the session's reporter), and at the end
whatever was not streamed.

Pipes has messages for materializations and check results only. A drift action or an anomaly goes as a
custom message whose payload is the event itself (``{"rocky.events": <RunEvent>}``), which
``dagster_rocky``'s invocation turns into the same ``AssetObservation`` the streaming path yields; an
anomaly also reports the ``row_count_anomaly`` check (failed, ``WARN``) when it is declared, and a drift
action joins its asset's materialization metadata (``rocky/drift``), as on the streaming path.

Only active when ``DAGSTER_PIPES_CONTEXT`` is in the environment; ``dagster_pipes`` is imported lazily then,
so the engine never depends on Dagster otherwise. Dagster rejects events for assets or checks it did not
ask for, so a materialization is reported only for an asset key in the Pipes context, and a check result only
for a check key the integration passed in the extras (``{"rocky": {"check_keys": [[path, name], ...]}}``).
A reporting problem is logged and never changes the run's outcome.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rocky_engine.logs import get_logger
from rocky_engine.run.output import RunOutput
from rocky_engine.wire.checks import CheckResult
from rocky_engine.wire.events import EVENTS_TARGET, RunEvent
from rocky_engine.wire.metadata import (
    ANOMALY_CHECK,
    DRIFT,
    FINISHED_AT,
    anomaly_metadata,
    check_metadata,
    dagster_check_name,
    dagster_severity,
    drift_entry,
    materialization_metadata,
    row_counts_after_run,
)
from rocky_engine.wire.run import MaterializationInfo

PIPES_CONTEXT_ENV = "DAGSTER_PIPES_CONTEXT"
EXTRAS_KEY = "rocky"


def pipes_active(environ: Mapping[str, str] | None = None) -> bool:
    return PIPES_CONTEXT_ENV in (os.environ if environ is None else environ)


class PipesReporter:
    """One Pipes session for the whole run: events are reported as they happen (``run.events``), then
    :func:`report_to_pipes` reports what was not streamed and closes the session.

    Dagster refuses a second materialization of one asset in a step, so each asset and each check is sent
    once; the calls are serialized (model tasks finish on several threads).
    """

    def __init__(self, pipes: Any) -> None:
        self.pipes = pipes
        self.in_scope: set[str] = set(pipes.asset_keys) if pipes.is_asset_step else set()
        self.wanted_checks = _wanted_checks(pipes.extras)
        self.sent_assets: set[str] = set()
        self.sent_checks: set[tuple[str, str]] = set()
        #: drift actions on an asset not materialized yet: they join its materialization's metadata
        self.pending_drift: dict[str, list[dict[str, Any]]] = {}
        self.count = 0
        self._lock = threading.Lock()

    def materialization(self, mat: MaterializationInfo, run_id: str | None, row_count: int | None = None,
                        *, pipeline: str | None = None, finished_at: datetime | None = None) -> None:
        key = _key(mat.asset_key)
        with self._lock:
            if key not in self.in_scope or key in self.sent_assets:
                return
            metadata: dict[str, Any] = materialization_metadata(mat, run_id, row_count, pipeline=pipeline,
                                                                finished_at=finished_at)
            if FINISHED_AT in metadata:
                metadata[FINISHED_AT] = {"raw_value": metadata[FINISHED_AT], "type": "timestamp"}
            drift = self.pending_drift.pop(key, None)
            if drift:
                metadata[DRIFT] = drift
            self._send(lambda: self.pipes.report_asset_materialization(asset_key=key, metadata=metadata))
            self.sent_assets.add(key)

    def check(self, asset_key: list[str], check: CheckResult) -> None:
        key = _key(asset_key)
        name = dagster_check_name(check.name, getattr(check, "kind", None))
        with self._lock:
            if not self._check_wanted(key, name):
                return
            self._send(lambda: self.pipes.report_asset_check(
                check_name=name, passed=check.passed, severity=dagster_severity(check),
                metadata={"severity": check.severity, **check_metadata(check)}, asset_key=key,
            ))
            self.sent_checks.add((key, name))

    def observation(self, event: RunEvent) -> None:
        """A drift or anomaly event on an asset in scope, as it happens (see the module docstring)."""
        key = _key(event.asset_key)
        with self._lock:
            if key not in self.in_scope:
                return
            if event.drift is not None and key not in self.sent_assets:
                self.pending_drift.setdefault(key, []).append(drift_entry(event.drift))
            payload = {EVENTS_TARGET: event.wire()}
            self._send(lambda: self.pipes.report_custom_message(payload))
            anomaly = event.anomaly
            if anomaly is not None and self._check_wanted(key, ANOMALY_CHECK):
                # advisory: an anomaly never fails a run, so its check fails with WARN severity
                self._send(lambda: self.pipes.report_asset_check(
                    check_name=ANOMALY_CHECK, passed=False, severity="WARN",
                    metadata=anomaly_metadata(anomaly), asset_key=key,
                ))
                self.sent_checks.add((key, ANOMALY_CHECK))

    def _check_wanted(self, key: str, name: str) -> bool:
        if key not in self.in_scope or (key, name) in self.sent_checks:
            return False
        return self.wanted_checks is None or (key, name) in self.wanted_checks

    def _send(self, call: Any) -> None:
        try:
            call()
            self.count += 1
        except Exception as exc:  # reporting is best-effort: the run result on stdout stays the truth
            get_logger("pipes").warning("could not report to Dagster Pipes: %s", exc)


_session: tuple[Any, PipesReporter] | None = None
_session_lock = threading.Lock()


def pipes_reporter(environ: Mapping[str, str] | None = None) -> PipesReporter | None:
    """The run's Pipes reporter, opened on first use; None outside Pipes (or without dagster-pipes)."""
    global _session
    if not pipes_active(environ):
        return None
    with _session_lock:
        if _session is not None:
            return _session[1]
        log = get_logger("pipes")
        try:
            from dagster_pipes import open_dagster_pipes
        except ImportError:
            log.warning("launched under Dagster Pipes but dagster-pipes is not installed; install "
                        "rocky[dagster]")
            return None
        try:
            manager = open_dagster_pipes()
            pipes = manager.__enter__()
        except Exception as exc:
            log.warning("could not open the Dagster Pipes session: %s", exc)
            return None
        _session = (manager, PipesReporter(pipes))
        # A run that ends in an error never reaches report_to_pipes: close the session at exit anyway,
        # so Dagster reads what was streamed and the "closed" message instead of a vanished process.
        atexit.unregister(_close_session)  # once per process, however many runs it makes
        atexit.register(_close_session)
        return _session[1]


def _close_session() -> None:
    global _session
    with _session_lock:
        if _session is None:
            return
        manager, _ = _session
        _session = None
    try:
        manager.__exit__(None, None, None)
    except Exception as exc:
        get_logger("pipes").warning("could not close the Dagster Pipes session: %s", exc)


def report_to_pipes(out: RunOutput, environ: Mapping[str, str] | None = None) -> int:
    """Report ``out``'s materializations and check results that were not streamed yet, then close the
    session; return how many events were sent in the whole run."""
    reporter = pipes_reporter(environ)
    if reporter is None:
        return 0
    try:
        failed = {_key(e.asset_key) for e in out.errors}
        counts = row_counts_after_run(out.check_results)
        for mat in out.materializations:
            if _key(mat.asset_key) not in failed:
                reporter.materialization(mat, out.run_id, counts.get(tuple(mat.asset_key)))
        for table in out.check_results:
            for check in table.checks:
                reporter.check(table.asset_key, check)
        return reporter.count
    finally:
        _close_session()


def _key(path: list[str]) -> str:
    # Dagster Pipes speaks user-string asset keys: path components joined with "/".
    return "/".join(path)


def _wanted_checks(extras: Mapping[str, Any]) -> set[tuple[str, str]] | None:
    """The (asset key, check name) pairs Dagster declared; None when the launcher did not say."""
    block = extras.get(EXTRAS_KEY) if isinstance(extras, Mapping) else None
    if not isinstance(block, Mapping) or "check_keys" not in block:
        return None
    wanted: set[tuple[str, str]] = set()
    for item in block["check_keys"] or []:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], list | tuple):
            wanted.add((_key([str(p) for p in item[0]]), str(item[1])))
    return wanted
