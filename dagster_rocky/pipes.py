"""``RockyResource.run_pipes``: the engine as a Dagster Pipes external process.

Dagster's own ``PipesSubprocessClient`` raises on any non-zero exit, which would throw away what a
partially successful run (exit 2) already reported. This runs the engine under the same watchdog as every
other command, inside ``open_pipes_session``, and keeps the engine's JSON result next to the reported
events. The engine side (``rocky_engine.run.pipes_report``) reports only the selected assets and the check
keys passed in the extras, so Dagster never receives an event it did not ask for.

Pipes has no observation message: the engine sends each drift action and anomaly as a custom message
holding the ``rocky.events`` event, and ``get_results`` turns it into the ``AssetObservation`` the
streaming path yields for it (``streaming.observation``); the anomaly's ``row_count_anomaly`` check
result and the materialization's ``rocky/drift`` metadata come from the engine as ordinary Pipes reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import ValidationError

from dagster_rocky.resource import ExecutionContext, parse_outcome, step_log_forwarder, trigger_env
from dagster_rocky.streaming import observation
from dagster_rocky.types import EVENTS_TARGET, RunEvent, RunResult

if TYPE_CHECKING:
    from dagster_rocky.resource import RockyResource

#: extras key the engine-side reporter reads (``{"check_keys": [[asset_key_path, check_name], ...]}``)
EXTRAS_KEY = "rocky"


class RockyPipesInvocation(dg.PipesClientCompletedInvocation):
    """A finished Pipes invocation of ``rocky run`` plus the engine's parsed run result."""

    def __init__(self, session: dg.PipesSession, run_result: RunResult) -> None:
        super().__init__(
            session,
            metadata={"rocky/run_id": run_result.run_id or "", "rocky/status": run_result.status},
        )
        self.run_result = run_result

    # The override widens the element type: a step may yield observations, and `yield from
    # invocation.get_results()` is how a Pipes step hands everything to Dagster.
    def get_results(  # type: ignore[override]
        self, *, implicit_materializations: bool = False
    ) -> Sequence[dg.PipesExecutionResult | dg.AssetObservation]:
        """Reported results, after an observation per drift action and anomaly the engine sent; no
        implicit materializations by default, so a failed table stays failed."""
        results = super().get_results(implicit_materializations=implicit_materializations)
        return [*self.get_observations(), *results]

    def get_observations(self) -> list[dg.AssetObservation]:
        """The engine's drift and anomaly events (Pipes custom messages) as Dagster observations."""
        observations = []
        for payload in self._session.get_custom_messages():
            doc = payload.get(EVENTS_TARGET) if isinstance(payload, dict) else None
            if not isinstance(doc, dict):
                continue  # a custom message of the user's own (extras, a wrapper script)
            try:
                event = RunEvent.model_validate(doc)
            except ValidationError:
                continue  # an event this version cannot read
            if event.asset_key and (event.drift is not None or event.anomaly is not None):
                observations.append(observation(dg.AssetKey(event.asset_key), event))
        return observations


def _check_keys(context: ExecutionContext) -> list[list[Any]]:
    try:
        keys = context.selected_asset_check_keys
    except Exception:  # an op context outside an asset has no checks
        return []
    return [[list(k.asset_key.path), k.name] for k in keys]


def run_under_pipes(
    rocky: RockyResource,
    context: ExecutionContext,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    extras: Mapping[str, Any] | None = None,
) -> RockyPipesInvocation:
    """Run ``rocky <args>`` with a Pipes context injected through the environment."""
    all_extras: dict[str, Any] = {EXTRAS_KEY: {"check_keys": _check_keys(context)}, **(extras or {})}
    cmd = rocky.command(args)
    with dg.open_pipes_session(
        context=context,
        context_injector=dg.PipesEnvContextInjector(),
        message_reader=dg.PipesTempFileMessageReader(),
        extras=all_extras,
    ) as session:
        run_env = {**trigger_env(context), **(env or {}), **session.get_bootstrap_env_vars()}
        outcome = rocky.execute(cmd, env=run_env, on_stderr_line=step_log_forwarder(context))
    result = parse_outcome(outcome, RunResult, "run", timeout_seconds=rocky.timeout_seconds)
    return RockyPipesInvocation(session, result)
