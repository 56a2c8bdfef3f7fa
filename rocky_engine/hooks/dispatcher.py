"""The hook dispatcher: the ``EventSink`` a run fires its lifecycle events into.

For one event it runs the event's command hooks in order, then delivers its webhook, all inline in the
thread that fired (a ``before_*`` hook must finish before the work it guards starts). A command hook that
fails follows its ``on_failure``:

- ``warn`` (default): a warning naming the hook; the run goes on.
- ``ignore``: nothing but a debug line.
- ``abort``: on an event that happens before work (``pipeline_start``, ``before_model_run``,
  ``before_materialize``, ``before_checks``, ``discover_complete``, ``compile_complete``) the remaining
  hooks of the event are skipped, the webhook is still delivered, and :class:`HookAbort` is raised. From
  then on every later ``before_*`` event raises too, so no further table or model materializes; the runner
  records those as failed with the abort message. At ``pipeline_complete`` (``FAILING_EVENTS``) it raises
  :class:`HookAbort` too: the work is done, but the run becomes a ``Failure`` naming the hook (an explicit
  abort is never silently downgraded). On any other event abort acts like ``warn``.

A webhook that fails is warned about and never fails the run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocky_engine.errors import HookAbort
from rocky_engine.hooks.event import ABORTABLE_EVENTS, FAILING_EVENTS, HookEvent, rfc3339_now
from rocky_engine.logs import get_logger
from rocky_engine.state._time import rfc3339

if TYPE_CHECKING:
    from rocky_engine.config import CommandHook, HookConfig, RockyConfig, WebhookHook
    from rocky_engine.hooks.commands import CommandOutcome
    from rocky_engine.hooks.sink import EventSink
    from rocky_engine.hooks.webhooks import DeliveryOutcome

log = get_logger("hooks")


@dataclass(frozen=True)
class HookResult:
    """The outcome of one hook for one fired event (``rocky hooks test`` reports these)."""

    kind: str  # "command" | "webhook"
    #: ``on_<event>[i]`` for a command hook, ``webhooks.on_<event>`` for a webhook
    hook: str
    ok: bool
    duration_ms: int
    #: program name (command) or scheme://host (webhook): never the full command line or URL
    target: str
    exit_code: int | None = None
    status_code: int | None = None
    attempts: int | None = None
    error: str | None = None
    on_failure: str | None = None


class HookDispatcher:
    """Runs the hooks of ``hooks`` for the events of one run (thread-safe)."""

    def __init__(
        self,
        hooks: HookConfig,
        *,
        run_id: str,
        pipeline: str,
        cwd: Path,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], str] = rfc3339_now,
    ) -> None:
        self._hooks = hooks
        self.run_id = run_id
        self.pipeline = pipeline
        self._cwd = cwd
        self._environ = environ
        self._clock = clock
        self._lock = threading.Lock()
        self._aborted: HookAbort | None = None

    @property
    def aborted(self) -> HookAbort | None:
        """The abort that stopped this run, if a hook aborted it."""
        return self._aborted

    def fire(
        self,
        event: str,
        *,
        model: str | None = None,
        table: str | None = None,
        error: str | None = None,
        duration_ms: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Run the hooks of ``event``.

        Raises:
            HookAbort: an ``abort`` hook failed on this event, or on an earlier one of this run (then every
                later ``before_*`` event raises, so nothing else materializes).
        """
        previous = self._aborted
        if previous is not None and event in ABORTABLE_EVENTS:
            raise HookAbort(
                f"skipped: the run was aborted by a hook on_{previous.event}", event=previous.event
            )
        commands, webhook = self._hooks.for_event(event)
        if not commands and webhook is None:
            return
        self.fire_report(
            event, model=model, table=table, error=error, duration_ms=duration_ms, metadata=metadata,
            raise_on_abort=True,
        )

    def fire_report(
        self,
        event: str,
        *,
        model: str | None = None,
        table: str | None = None,
        error: str | None = None,
        duration_ms: int | None = None,
        metadata: dict[str, Any] | None = None,
        raise_on_abort: bool = False,
    ) -> list[HookResult]:
        """Run the hooks of ``event`` and return what each did (``rocky hooks test`` passes
        ``raise_on_abort=False`` to report an abort instead of raising it)."""
        commands, webhook = self._hooks.for_event(event)
        ctx = HookEvent(
            event=event, run_id=self.run_id, pipeline=self.pipeline, timestamp=self._clock(),
            model=model, table=table, error=error, duration_ms=duration_ms, metadata=dict(metadata or {}),
        )
        results: list[HookResult] = []
        abort: HookAbort | None = None
        if commands:
            # Only here: subprocess and shlex load when a command hook runs, not on every run.
            from rocky_engine.hooks.commands import run_command_hook
        for index, hook in enumerate(commands):
            outcome = run_command_hook(hook, ctx, cwd=self._cwd, environ=self._environ)
            label = f"on_{event}[{index}]"
            results.append(_command_result(label, hook, outcome))
            if outcome.ok:
                continue
            abort = self._command_failed(label, hook, outcome, event)
            if abort is not None:
                break
        if webhook is not None:
            results.append(self._deliver(event, webhook, ctx))
        if abort is not None:
            with self._lock:
                if self._aborted is None:
                    self._aborted = abort
            if raise_on_abort:
                raise abort
        return results

    def _command_failed(
        self, label: str, hook: CommandHook, outcome: CommandOutcome, event: str
    ) -> HookAbort | None:
        from rocky_engine.hooks.commands import program_name

        what = f"hook {label} ({program_name(hook.command)}) {outcome.describe()}"
        if hook.on_failure == "ignore":
            log.debug("%s (on_failure = ignore)", what)
            return None
        if outcome.interrupted:
            # the run is stopping on its own signal: it does not "go on", and there is nothing to abort
            log.warning("%s; the run stops without starting anything else", what)
            return None
        if hook.on_failure == "abort" and event in ABORTABLE_EVENTS:
            log.error("%s; on_failure = abort: stopping the run before its next materialization", what)
            return HookAbort(
                f"aborted by {what}",
                event=event,
                hint="fix the hook or set on_failure = \"warn\" to let the run go on",
            )
        if hook.on_failure == "abort" and event in FAILING_EVENTS:
            log.error("%s; on_failure = abort: the run fails (its work is done and stays)", what)
            return HookAbort(
                f"aborted by {what}",
                event=event,
                hint="fix the hook or set on_failure = \"warn\" to let the run stand",
            )
        if hook.on_failure == "abort":
            log.warning(
                "%s (on_failure = abort only stops a run on events before work, or fails it at "
                "pipeline_complete; the run goes on)", what
            )
        else:
            log.warning("%s; the run goes on (on_failure = warn)", what)
        return None

    def _deliver(self, event: str, webhook: WebhookHook, ctx: HookEvent) -> HookResult:
        from rocky_engine.hooks.webhooks import deliver_webhook, receiver_name

        outcome: DeliveryOutcome = deliver_webhook(webhook, ctx)
        target = receiver_name(webhook.url)
        if not outcome.ok:
            n = outcome.attempts
            tries = f" after {n} attempt{'s' * (n != 1)}" if n else ""
            log.warning(
                "webhook on_%s (%s preset, %s) failed%s: %s; the run goes on",
                event, webhook.preset, target, tries, outcome.error,
            )
        return HookResult(
            kind="webhook",
            hook=f"webhooks.on_{event}",
            ok=outcome.ok,
            duration_ms=outcome.duration_ms,
            target=target,
            status_code=outcome.status_code,
            attempts=outcome.attempts,
            error=outcome.error,
        )


def _command_result(label: str, hook: CommandHook, outcome: CommandOutcome) -> HookResult:
    from rocky_engine.hooks.commands import program_name

    return HookResult(
        kind="command",
        hook=label,
        ok=outcome.ok,
        duration_ms=outcome.duration_ms,
        target=program_name(hook.command),
        exit_code=outcome.exit_code,
        error=outcome.describe() or None,
        on_failure=hook.on_failure,
    )


def build_event_sink(
    config: RockyConfig,
    run_id: str,
    pipeline: str,
    *,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] | None = None,
) -> EventSink:
    """The event sink of one run: a :class:`HookDispatcher`, or a no-op sink when no hook is configured.

    ``clock`` is the run's (events are stamped with it). Also logs the hook warnings of loading (an unknown
    ``on_*`` key is skipped, and the run says so).
    """
    for warning in config.warnings:
        if "[hook" in warning:
            log.warning(warning)
    if config.hook.empty:
        from rocky_engine.hooks.sink import NullEventSink

        return NullEventSink()
    return HookDispatcher(
        config.hook, run_id=run_id, pipeline=pipeline, cwd=config.root,
        environ=os.environ if environ is None else environ,
        clock=rfc3339_now if clock is None else (lambda: rfc3339(clock())),
    )
