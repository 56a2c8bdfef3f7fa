"""``RockyResource``: drives the ``rocky`` CLI and reads its JSON back, nothing else.

The integration never imports the engine: it runs ``rocky <cmd> --output json`` as a child process (exactly
what a user's own wrapper script would do) and parses the document with :mod:`dagster_rocky.types` (the
engine's wire models, ``rocky_engine.wire``: the only part of the engine it imports).

Outcomes:

- exit 0 with a JSON document: the parsed result;
- any other exit with a parseable document of the expected command (exit 2 partial success, exit 1 with a
  run result, exit 3 from doctor, 130 after an interrupt): the parsed result, not an exception;
- a missing binary, a timeout, unparseable output or a failure without a document: ``dg.Failure`` with the
  command, the exit code and capped stdout/stderr previews in its metadata. A timeout is not retryable.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack, overload

import dagster as dg
from pydantic import BaseModel, Field, ValidationError

from dagster_rocky import _process
from dagster_rocky.types import (
    DagResult,
    DiscoverResult,
    DoctorResult,
    HistoryResult,
    ModelHistoryResult,
    RunResult,
)
from rocky_engine.wire.base import validation_summary

if TYPE_CHECKING:
    from dagster_rocky.pipes import RockyPipesInvocation
    from dagster_rocky.streaming import EventRouting, RockyRunStream

ModelT = TypeVar("ModelT", bound=BaseModel)
ExecutionContext = dg.AssetExecutionContext | dg.OpExecutionContext

#: characters of stdout / stderr kept in a failure's metadata
PREVIEW_CHARS = 4000

#: Dagster run tags that tell the engine who triggered it (recorded as the run record's ``trigger``)
_TRIGGER_TAGS = (("rocky/sensor", "sensor"), ("rocky/schedule", "schedule"))


class PipesRunOptions(TypedDict, total=False):
    """The ``rocky run`` options :meth:`RockyResource.run_pipes` accepts (flags: see ``run_args``)."""

    pipeline: str | None
    idempotency_key: str | None
    model: str | Sequence[str] | None
    parallel: int | None
    variables: Mapping[str, str] | None


class RunOptions(PipesRunOptions, total=False):
    """The options of :meth:`RockyResource.run` and ``run_streaming``: declared once so the ``run*``
    methods and ``run_args`` cannot drift apart."""

    resume_latest: bool


class RockyResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Runs the ``rocky`` CLI for Dagster assets, sensors and schedules. Constructing it does no I/O."""

    binary_path: str = Field(
        default="rocky",
        description="The rocky executable: a path, or a name looked up on PATH (then next to the Python "
        "interpreter, so an unactivated virtualenv works).",
    )
    config_path: str = Field(default="rocky.toml", description="The project's rocky.toml.")
    state_path: str | None = Field(
        default=None, description="Override of the state store file (--state-path); None: the engine default."
    )
    state_namespace: str | None = Field(
        default=None,
        description="Use the per-namespace state store <models>/.rocky-state/<KEY>.db (--state-namespace), "
        "so independent projects or fan-out runs do not share one writer lock. When set, state_path is "
        "not passed (as in the published dagster-rocky).",
    )
    wait_for_lock_seconds: int | None = Field(
        default=600,
        description="`rocky run --wait-for-lock`: how long a run waits for another run's state-store "
        "writer lock before failing (Dagster's multiprocess executor starts concurrent steps of one "
        "project). None or 0: fail at once, as the engine does by default.",
    )
    models_dir: str = Field(
        default="models", description="The project's models directory, relative to rocky.toml."
    )
    timeout_seconds: int = Field(
        default=3600,
        description="Wall-clock limit of one engine invocation; on expiry the whole process group is "
        "killed and the step fails without retry.",
    )

    # --- commands -------------------------------------------------------------------------------------

    def discover(self, pipeline: str | None = None) -> DiscoverResult:
        """``rocky discover``: the sources, their tables and their last sync times."""
        args = ["discover"] + (["--pipeline", pipeline] if pipeline else [])
        return self._invoke(args, DiscoverResult, "discover")

    def dag(self, pipeline: str | None = None) -> DagResult:
        """``rocky dag``: every model and replicated table with its dependencies (no warehouse access)."""
        args = ["dag"] + (["--pipeline", pipeline] if pipeline else [])
        return self._invoke(args, DagResult, "dag")

    def run(
        self,
        filter: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **options: Unpack[RunOptions],
    ) -> RunResult:
        """``rocky run``; a partial success (exit 2) or a run result with exit 1 is returned, not raised."""
        return self._invoke(self.run_args(filter, **options), RunResult, "run", env=env)

    def run_streaming(
        self,
        context: ExecutionContext,
        filter: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        routing: EventRouting | None = None,
        **options: Unpack[RunOptions],
    ) -> RockyRunStream:
        """``rocky run`` whose events reach Dagster while it runs: ``yield from rocky.run_streaming(...)``.

        Iterating yields a ``MaterializeResult`` per materialized asset, an ``AssetCheckResult`` per
        evaluated check and an ``AssetObservation`` per drift action or anomaly as the engine's
        ``rocky.events`` lines arrive; other stderr lines go to the step log. By default the engine's
        asset keys are the Dagster keys and only the step's selected keys and checks are reported;
        ``routing`` maps other keys. ``.result`` is the ``RunResult`` (any of its attributes can be read on
        the stream directly, as the published package's ``run_streaming`` returned it).
        """
        from dagster_rocky.streaming import RockyRunStream

        run_env = {**os.environ, **trigger_env(context), **(env or {})}
        cmd = self.command(self.run_args(filter, **options))
        lines = _process.stream_cli(cmd, timeout_seconds=self.timeout_seconds, env=run_env)
        return RockyRunStream(
            _started(lines, cmd[0]),
            finish=lambda outcome: parse_outcome(
                outcome, RunResult, "run", timeout_seconds=self.timeout_seconds
            ),
            routing=routing if routing is not None else default_routing(context),
            log_line=step_log_forwarder(context),
            pipeline=options.get("pipeline"),
        )

    def run_pipes(
        self,
        context: ExecutionContext,
        filter: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        extras: Mapping[str, Any] | None = None,
        **options: Unpack[PipesRunOptions],
    ) -> RockyPipesInvocation:
        """Run the engine under Dagster Pipes: the engine reports materializations and check results.

        ``yield from rocky.run_pipes(context).get_results()`` in an asset body.
        """
        from dagster_rocky.pipes import run_under_pipes

        return run_under_pipes(self, context, self.run_args(filter, **options), env=env, extras=extras)

    @overload
    def history(self, model: None = None, since: str | None = None) -> HistoryResult: ...

    @overload
    def history(self, model: str, since: str | None = None) -> ModelHistoryResult: ...

    def history(
        self, model: str | None = None, since: str | None = None
    ) -> HistoryResult | ModelHistoryResult:
        """``rocky history``: the newest runs recorded in the state store; with ``model``, that model's
        newest executions (``rocky history --model``, a document of its own)."""
        args = ["history"] + (["--model", model] if model else []) + (["--since", since] if since else [])
        if model:
            return self._invoke(args, ModelHistoryResult, "history")
        return self._invoke(args, HistoryResult, "history")

    def doctor(self, check: str | None = None) -> DoctorResult:
        """``rocky doctor``; a Critical check (exit 3) is a result, not an exception."""
        args = ["doctor"] + (["--check", check] if check else [])
        return self._invoke(args, DoctorResult, "doctor")

    # --- plumbing -------------------------------------------------------------------------------------

    def run_args(
        self,
        filter: str | None = None,
        *,
        pipeline: str | None = None,
        idempotency_key: str | None = None,
        model: str | Sequence[str] | None = None,
        parallel: int | None = None,
        resume_latest: bool = False,
        variables: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The ``run`` sub-command arguments (without the binary and global flags). ``model`` is one name
        or several (``+name`` / ``name+`` select its upstream / downstream models too)."""
        args = ["run"]
        if pipeline:
            args += ["--pipeline", pipeline]
        if filter:
            args += ["--filter", filter]
        for name in [model] if isinstance(model, str) else (model or []):
            args += ["--model", name]  # repeated: one invocation runs exactly these models
        if self.wait_for_lock_seconds:
            args += ["--wait-for-lock", str(self.wait_for_lock_seconds)]
        if parallel is not None:
            args += ["--parallel", str(parallel)]
        if resume_latest:
            args.append("--resume-latest")
        if idempotency_key:
            args += ["--idempotency-key", idempotency_key]
        for name, value in (variables or {}).items():
            args += ["--var", f"{name}={value}"]
        return args

    def command(self, args: Sequence[str]) -> list[str]:
        """The full command line: binary, global flags, then ``args``."""
        cmd = [self.resolve_binary(), "-c", self.config_path, "--output", "json"]
        if self.state_namespace:
            cmd += ["--state-namespace", self.state_namespace]
        elif self.state_path:
            cmd += ["--state-path", self.state_path]
        return cmd + list(args)

    def resolve_binary(self) -> str:
        """The executable to start; a ``dg.Failure`` naming what to fix when there is none."""
        configured = self.binary_path
        if os.sep in configured or (os.altsep and os.altsep in configured):
            if os.access(configured, os.X_OK) and Path(configured).is_file():
                return configured
            raise _missing_binary(configured)
        found = shutil.which(configured)
        if found:
            return found
        # dagster dev started from an unactivated virtualenv: the console script sits beside python.
        sibling = Path(sys.executable).parent / configured
        if sibling.is_file() and os.access(sibling, os.X_OK):
            return str(sibling)
        raise _missing_binary(configured)

    def _invoke(
        self,
        args: Sequence[str],
        model: type[ModelT],
        command: str,
        *,
        env: Mapping[str, str] | None = None,
        on_stderr_line: Callable[[str], None] | None = None,
    ) -> ModelT:
        cmd = self.command(args)
        outcome = self.execute(cmd, env=env, on_stderr_line=on_stderr_line)
        return parse_outcome(outcome, model, command, timeout_seconds=self.timeout_seconds)

    def execute(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        on_stderr_line: Callable[[str], None] | None = None,
    ) -> _process.CliOutcome:
        """Start ``cmd`` under the watchdog; a missing binary becomes a ``dg.Failure``."""
        full_env = {**os.environ, **(env or {})}
        try:
            return _process.run_cli(
                cmd, timeout_seconds=self.timeout_seconds, env=full_env, on_stderr_line=on_stderr_line
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise _missing_binary(cmd[0], str(exc)) from exc


def _started(
    lines: Generator[str, None, _process.CliOutcome], binary: str
) -> Generator[str, None, _process.CliOutcome]:
    """``lines`` with a binary that cannot be started (raised at the first ``next``) as a ``dg.Failure``."""
    try:
        first = next(lines)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    except (FileNotFoundError, PermissionError) as exc:
        raise _missing_binary(binary, str(exc)) from exc
    yield first
    outcome = yield from lines
    return outcome


def default_routing(context: ExecutionContext) -> EventRouting:
    """Engine keys are Dagster keys; an asset step reports only its selected keys and checks."""
    from dagster_rocky.streaming import EventRouting

    try:
        return EventRouting(
            selected=set(context.selected_asset_keys), checks=set(context.selected_asset_check_keys)
        )
    except Exception:  # an op outside an asset selects nothing: report every key the engine names
        return EventRouting()


def _missing_binary(binary: str, detail: str | None = None) -> dg.Failure:
    return dg.Failure(
        description=(
            f"rocky binary '{binary}' was not found or is not executable"
            + (f" ({detail})" if detail else "")
            + "; install the engine (pip install rocky) or set RockyResource(binary_path=...) to its path"
        ),
        metadata={"binary_path": binary},
        allow_retries=False,
    )


def parse_outcome(
    outcome: _process.CliOutcome, model: type[ModelT], command: str, *, timeout_seconds: float
) -> ModelT:
    """Turn one invocation into its result model, or the ``dg.Failure`` that explains it."""
    shown = " ".join(outcome.args)
    if outcome.timed_out:
        raise _failure(
            outcome,
            f"`{shown}` did not finish within timeout_seconds={timeout_seconds:g}; its process group was "
            "killed. Raise RockyResource(timeout_seconds=...) or find what hangs in the stderr preview",
            allow_retries=False,
        )
    document = _parse_document(outcome.stdout)
    if isinstance(document, dict) and document.get("command", command) == command:
        try:
            return model.model_validate(document)
        except ValidationError as exc:
            if outcome.returncode == 0:
                raise _failure(
                    outcome,
                    f"`{shown}` printed a {command} document this integration cannot read "
                    f"({validation_summary(exc)}); "
                    "check that the rocky engine and dagster-rocky versions match",
                ) from exc
    if outcome.returncode == 0:
        raise _failure(
            outcome,
            f"`{shown}` exited 0 but its stdout is not a JSON {command} document; logs belong on stderr, "
            "so check for a wrapper script that prints to stdout",
        )
    raise _failure(
        outcome,
        f"`{shown}` failed with exit code {outcome.returncode}: {_stderr_summary(outcome.stderr)}",
    )


def _parse_document(stdout: str) -> Any:
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _stderr_summary(stderr: str) -> str:
    """The engine's last error line (``error: ...`` text or a JSON log line's message)."""
    for line in reversed(stderr.strip().splitlines()):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                return line
            if isinstance(doc, dict) and "message" in doc:
                return str(doc["message"])
        return line
    return "no output on stderr"


def _failure(outcome: _process.CliOutcome, description: str, *, allow_retries: bool = True) -> dg.Failure:
    return dg.Failure(
        description=description,
        metadata={
            "command": dg.MetadataValue.text(" ".join(outcome.args)),
            "exit_code": outcome.returncode,
            "timed_out": outcome.timed_out,
            "duration_seconds": round(outcome.duration_seconds, 3),
            "stdout_preview": dg.MetadataValue.text(_process.preview(outcome.stdout, PREVIEW_CHARS)),
            "stderr_preview": dg.MetadataValue.text(_process.preview(outcome.stderr, PREVIEW_CHARS)),
        },
        allow_retries=allow_retries,
    )


def trigger_env(context: ExecutionContext) -> dict[str, str]:
    """``ROCKY_RUN_TRIGGER`` / ``ROCKY_SUBMISSION_ID`` so the run record says Dagster started it and how."""
    env: dict[str, str] = {}
    try:
        tags = context.run.tags
        env["ROCKY_SUBMISSION_ID"] = context.run.run_id
    except Exception:  # a context built for a direct invocation has no run
        return env
    for tag, trigger in _TRIGGER_TAGS:
        if tag in tags:
            env["ROCKY_RUN_TRIGGER"] = trigger
            break
    return env


_LEVELS = {
    "debug": "debug",
    "info": "info",
    "warning": "warning",
    "warn": "warning",
    "error": "error",
    "critical": "critical",
}


def step_log_forwarder(context: ExecutionContext) -> Callable[[str], None]:
    """A callback that writes one engine stderr line (JSON log line or text) to the step's log."""
    log = context.log

    def forward(line: str) -> None:
        if not line.strip():
            return
        level = "info"
        message = line
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                doc = None
            if isinstance(doc, dict) and "message" in doc:
                level = _LEVELS.get(str(doc.get("level", "info")).lower(), "info")
                message = str(doc["message"])
        getattr(log, level)(f"[rocky] {message}")

    return forward
