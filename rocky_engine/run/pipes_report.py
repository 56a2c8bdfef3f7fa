"""Report a finished run to Dagster Pipes when the engine was launched under a Pipes session.

Only active when ``DAGSTER_PIPES_CONTEXT`` is in the environment; ``dagster_pipes`` is imported lazily then,
so the engine never depends on Dagster otherwise. Dagster rejects events for assets or checks it did not
ask for, so a materialization is reported only for an asset key in the Pipes context, and a check result only
for a check key the integration passed in the extras (``{"rocky": {"check_keys": [[path, name], ...]}}``).
A reporting problem is logged and never changes the run's outcome.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rocky_engine.logs import get_logger
from rocky_engine.run.output import RunOutput
from rocky_engine.wire.metadata import check_metadata, dagster_severity, materialization_metadata

PIPES_CONTEXT_ENV = "DAGSTER_PIPES_CONTEXT"
EXTRAS_KEY = "rocky"


def pipes_active(environ: Mapping[str, str] | None = None) -> bool:
    return PIPES_CONTEXT_ENV in (os.environ if environ is None else environ)


def report_to_pipes(out: RunOutput, environ: Mapping[str, str] | None = None) -> int:
    """Report ``out``'s materializations and check results; return how many events were sent."""
    if not pipes_active(environ):
        return 0
    log = get_logger("pipes")
    try:
        from dagster_pipes import open_dagster_pipes
    except ImportError:
        log.warning("launched under Dagster Pipes but dagster-pipes is not installed; install rocky[dagster]")
        return 0
    try:
        with open_dagster_pipes() as pipes:
            return _report(pipes, out)
    except Exception as exc:  # reporting is best-effort: the run result on stdout stays the truth
        log.warning("could not report the run to Dagster Pipes: %s", exc)
        return 0


def _key(path: list[str]) -> str:
    # Dagster Pipes speaks user-string asset keys: path components joined with "/".
    return "/".join(path)


def _report(pipes: Any, out: RunOutput) -> int:
    in_scope: set[str] = set(pipes.asset_keys) if pipes.is_asset_step else set()
    wanted_checks = _wanted_checks(pipes.extras)
    sent = 0
    failed = {_key(e.asset_key) for e in out.errors}
    for mat in out.materializations:
        key = _key(mat.asset_key)
        if key in failed or key not in in_scope:
            continue
        pipes.report_asset_materialization(asset_key=key, metadata=materialization_metadata(mat, out.run_id))
        sent += 1
    for table in out.check_results:
        key = _key(table.asset_key)
        if key not in in_scope:
            continue
        for check in table.checks:
            if wanted_checks is not None and (key, check.name) not in wanted_checks:
                continue
            pipes.report_asset_check(
                check_name=check.name,
                passed=check.passed,
                severity=dagster_severity(check),
                metadata=check_metadata(check) or None,
                asset_key=key,
            )
            sent += 1
    return sent


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
