"""Results of ``rocky hooks list`` and ``rocky hooks test``.

``hooks list`` shows command hooks only (a webhook block never appears there; ``rocky validate`` parses
both). It shows the keys of a hook's ``env`` table, never the values, which are usually secrets, and each
command line with the project's secrets (a ``${PAGER_TOKEN}`` substituted into it) named, not shown
(rocky_engine/redact.py): redacted before a table can wrap a secret over two lines.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rocky_engine.config import HOOK_EVENTS, RockyConfig
from rocky_engine.errors import UsageError
from rocky_engine.hooks.dispatcher import HookDispatcher, HookResult
from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.redact import redact
from rocky_engine.wire.hooks import HooksListResult, HooksTestResult, ListedHook, TestedHook

#: events whose synthetic context names a model / carries an error
_MODEL_EVENTS = frozenset({"before_model_run", "after_model_run", "model_error"})
_TABLE_EVENTS = frozenset(
    {"before_materialize", "after_materialize", "materialize_error", "check_result", "drift_detected",
     "anomaly_detected"}
)
_ERROR_EVENTS = frozenset({"pipeline_error", "model_error", "materialize_error", "budget_breach"})
_STATUS = {"pipeline_error": {"status": "Failure"}, "pipeline_complete": {"status": "Success"}}


class HooksListOutput(HooksListResult, Result):
    """``rocky hooks list``, rendered."""

    def render_table(self) -> str:
        if not self.hooks:
            text = "no command hooks configured ([[hook.on_<event>]])\n"
        else:
            rows = [
                [h.event, h.command, h.on_failure, str(h.timeout_ms), ", ".join(h.env)] for h in self.hooks
            ]
            text = render_rows(None, ["event", "command", "on_failure", "timeout_ms", "env"], rows)
        return text + "".join(f"warning: {w}\n" for w in self.warnings)

    def render_md(self) -> str:
        if not self.hooks:
            return "no command hooks configured\n"
        rows = [[h.event, f"`{h.command}`", h.on_failure, str(h.timeout_ms)] for h in self.hooks]
        return md_table(["event", "command", "on_failure", "timeout_ms"], rows)


class HooksTestOutput(HooksTestResult, Result):
    """``rocky hooks test on_<event>``, rendered; exit 1 when a hook failed."""

    def exit_code(self) -> int:
        return 0 if all(r.ok for r in self.results) else 1

    def render_table(self) -> str:
        rows = [
            [r.hook, r.target, "ok" if r.ok else "FAILED", f"{r.duration_ms}", r.error or ""]
            for r in self.results
        ]
        headers = ["hook", "target", "result", "ms", "error"]
        return render_rows(f"fired {self.event} ({self.run_id})", headers, rows)


def hooks_list(config: RockyConfig) -> HooksListOutput:
    hooks = [
        ListedHook(
            event=f"on_{event}", index=i, command=redact(h.command), timeout_ms=h.timeout_ms,
            on_failure=h.on_failure, env=sorted(h.env),
        )
        for event in HOOK_EVENTS
        for i, h in enumerate(config.hook.commands.get(event, []))
    ]
    warnings = [w for w in config.warnings if "[hook" in w]
    return HooksListOutput(total=len(hooks), hooks=hooks, warnings=warnings)


def hooks_test(config: RockyConfig, event_key: str, *, pipeline: str | None = None) -> HooksTestOutput:
    """Fire a synthetic ``event_key`` at its hooks.

    Raises:
        UsageError: the event is unknown or has no hook configured.
        ConfigError: ``pipeline`` is not a pipeline of the project.
    """
    event = event_key.removeprefix("on_")
    if event not in HOOK_EVENTS:
        raise UsageError(
            f"unknown hook event '{event_key}'",
            hint="valid events: " + ", ".join(f"on_{e}" for e in HOOK_EVENTS),
        )
    commands, webhook = config.hook.for_event(event)
    if not commands and webhook is None:
        configured = sorted({f"on_{e}" for e in (*config.hook.commands, *config.hook.webhooks)})
        raise UsageError(
            f"no hook is configured for on_{event}",
            hint=f"configured events: {', '.join(configured)}" if configured
            else "add a [[hook.on_<event>]] or [hook.webhooks.on_<event>] table to rocky.toml",
        )
    if pipeline is not None:
        config.pipeline(pipeline)
    name = pipeline or next(iter(config.pipelines), "test")
    run_id = "hooks-test-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    dispatcher = HookDispatcher(config.hook, run_id=run_id, pipeline=name, cwd=config.root)
    results = dispatcher.fire_report(
        event,
        model="example_model" if event in _MODEL_EVENTS else None,
        table="example.main.example_model" if event in _MODEL_EVENTS | _TABLE_EVENTS else None,
        error="synthetic error fired by `rocky hooks test`" if event in _ERROR_EVENTS else None,
        duration_ms=1234 if event.startswith(("after_", "pipeline_complete", "pipeline_error")) else None,
        metadata={"test": True, **_STATUS.get(event, {})},
        raise_on_abort=False,
    )
    tested = [_tested(r) for r in results]
    failed = [r.hook for r in tested if not r.ok]
    aborts = any(not r.ok and r.on_failure == "abort" for r in tested)
    return HooksTestOutput(
        event=f"on_{event}", run_id=run_id, pipeline=name, results=tested,
        status="abort" if aborts else "continue",
        message=f"failed: {', '.join(failed)}" if failed else None,
    )


def _tested(r: HookResult) -> TestedHook:
    return TestedHook(
        kind=r.kind, hook=r.hook, target=r.target, ok=r.ok, duration_ms=r.duration_ms, exit_code=r.exit_code,
        status_code=r.status_code, attempts=r.attempts, error=r.error, on_failure=r.on_failure,
    )
