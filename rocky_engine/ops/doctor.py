"""``rocky doctor``: health checks for a pre-flight, a cron of their own, or a person (CONTRACT section 8).

Checks, in order: ``config``, ``state``, ``state_schema``, ``adapters``, ``pipelines``, ``auth``,
``scheduler`` (only when some pipeline has a ``[schedule]``), and ``state_rw`` / ``state_concurrency``
(only on a remote ``[state] backend``). Severity rules from the seed:

- config problems and an unreachable warehouse (or rejected credentials) are Critical: a run would fail;
- a degraded or unreadable local state store is a Warning: a run can still start (and recreate it); a
  damaged one (corrupt, or a stored value that no longer parses) is Critical: every command fails on it;
- a wedged scheduler (tick.lock held, heartbeat stale) is Critical, a timer that looks dead a Warning.

Any Critical makes the command exit 3. When rocky.toml does not load, the checks that need it are left
out (or, when asked for with ``--check``, reported Critical with the reason).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from rocky_engine.errors import (
    ConfigError,
    RockyError,
    StateDamagedError,
    StateError,
    StateSchemaError,
    UsageError,
)
from rocky_engine.ops.doctor_finding import Finding, worst
from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.project import Project, load_project
from rocky_engine.wire.doctor import DoctorCheck, DoctorResult, DoctorStatus

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

CHECK_NAMES: tuple[str, ...] = (
    "config", "state", "state_schema", "adapters", "pipelines", "auth", "scheduler", "state_rw",
    "state_concurrency",
)
#: checks that apply only to a remote ``[state] backend`` (run when one is configured, or when asked)
REMOTE_CHECKS: tuple[str, ...] = ("state_rw", "state_concurrency")


class DoctorOutput(DoctorResult, Result):
    """``rocky doctor``: the report, rendered; exit 3 on any Critical."""

    def exit_code(self) -> int:
        return 3 if self.overall == "critical" else 0

    def render_table(self) -> str:
        marks = {"healthy": "ok", "warning": "WARN", "critical": "CRIT"}
        rows = [[c.name, marks[c.status], c.message] for c in self.checks]
        text = render_rows(f"rocky doctor: {self.overall}", ["check", "status", "message"], rows)
        if self.suggestions:
            text += "\nsuggestions:\n" + "".join(f"  - {s}\n" for s in self.suggestions)
        return text

    def render_md(self) -> str:
        rows = [[c.name, c.status, c.message] for c in self.checks]
        text = f"**rocky doctor**: {self.overall}\n\n" + md_table(["check", "status", "message"], rows)
        if self.suggestions:
            text += "\n" + "".join(f"- {s}\n" for s in self.suggestions)
        return text


def run_doctor(
    config_path: Path,
    *,
    state_path: str | None = None,
    state_namespace: str | None = None,
    only: str | None = None,
    now: datetime | None = None,
    environ: Mapping[str, str] | None = None,
) -> DoctorOutput:
    """Run every check (or only ``only``) and return the report.

    Raises:
        UsageError: ``only`` is not a check name.
    """
    if only is not None and only not in CHECK_NAMES:
        raise UsageError(f"unknown check '{only}'", hint=f"valid checks: {', '.join(CHECK_NAMES)}")
    from rocky_engine.project import project_state_file
    from rocky_engine.state.location import state_file

    env = os.environ if environ is None else environ
    checks: list[DoctorCheck] = []
    suggestions: list[str | dict[str, Any]] = []

    def record(name: str, fn: Callable[[], Finding]) -> None:
        t0 = time.perf_counter()
        try:
            finding = fn()
        except RockyError as exc:  # a check that could not finish says why instead of crashing doctor
            finding = Finding("critical", str(exc))
        checks.append(
            DoctorCheck(name=name, status=finding.status, message=finding.message,
                        duration_ms=int((time.perf_counter() - t0) * 1000))
        )
        suggestions.extend(s for s in finding.suggestions if s not in suggestions)

    project: Project | None = None
    load_error: str | None = None
    t0 = time.perf_counter()
    try:
        project = load_project(config_path, state_path=state_path, state_namespace=state_namespace, env=env)
    except ConfigError as exc:
        load_error = str(exc)
    load_ms = int((time.perf_counter() - t0) * 1000)

    if only in (None, "config"):
        finding = check_config(project, load_error)
        checks.append(DoctorCheck(name="config", status=finding.status, message=finding.message,
                                  duration_ms=load_ms))
        suggestions.extend(finding.suggestions)
    location_error: str | None = None
    try:
        store_file = project.state_path(reading=True) if project is not None else project_state_file(
            config_path, state_path=state_path, namespace=state_namespace
        )
    except StateError as exc:  # e.g. two stores (an older location and the current one): runs refuse
        location_error = str(exc)
        store_file = state_file(
            config_path.absolute().parent, state_path=state_path, namespace=state_namespace
        )
    on_mismatch = project.config.state.on_schema_mismatch if project is not None else "recreate"
    for name, check in (
        ("state", lambda: with_upstream_store(check_state(store_file), store_file)),
        ("state_schema", lambda: check_state_schema(store_file, on_mismatch)),
    ):
        if only in (None, name):
            record(name, (lambda: Finding("critical", location_error)) if location_error else check)
    if project is None:
        if only not in (None, "config", "state", "state_schema"):
            record(only, lambda: Finding("critical", f"not checked: rocky.toml does not load ({load_error})"))
        return _result(checks, suggestions)
    loaded: Project = project  # narrowed once, for the lambdas below
    if only in (None, "adapters"):
        from rocky_engine.ops.doctor_warehouse import check_adapters

        record("adapters", lambda: check_adapters(loaded.config))
    if only in (None, "pipelines"):
        record("pipelines", lambda: check_pipelines(loaded, store_file, env))
    if only in (None, "auth"):
        from rocky_engine.ops.doctor_warehouse import check_auth

        record("auth", lambda: check_auth(loaded.config))
    scheduled = any(p.schedule is not None for p in loaded.config.pipelines.values())
    if only == "scheduler" or (only is None and scheduled):
        from rocky_engine.ops.doctor_scheduler import check_scheduler

        record("scheduler", lambda: check_scheduler(loaded, store_file, now))
    remote = loaded.config.state.backend != "local"
    for name in REMOTE_CHECKS:
        if only == name or (only is None and remote):
            record(name, functools.partial(check_remote_state, loaded, name))
    return _result(checks, suggestions)


def _result(checks: list[DoctorCheck], suggestions: list[str | dict[str, Any]]) -> DoctorOutput:
    return DoctorOutput(overall=worst([c.status for c in checks]), checks=checks, suggestions=suggestions)


# --- config ---------------------------------------------------------------------------------------------


def check_config(project: Project | None, load_error: str | None) -> Finding:
    """rocky.toml loads and its cross-references hold; warnings (unknown hook keys) are a Warning."""
    if project is None:
        return Finding(
            "critical", f"rocky.toml does not load: {load_error}",
            ("fix rocky.toml; `rocky validate` lists every problem",),
        )
    from rocky_engine.config.validation import validate_config

    messages = validate_config(project.config)
    errors = [m for m in messages if m.severity == "error"]
    warnings = [m for m in messages if m.severity == "warning"]
    cfg = project.config
    summary = f"{len(cfg.adapters)} adapter(s), {len(cfg.pipelines)} pipeline(s)"
    if errors:
        first = errors[0]
        return Finding(
            "critical",
            f"{len(errors)} config error(s); first: {first.code} {first.message}",
            ("run `rocky validate` and fix every error it reports",),
        )
    if warnings:
        return Finding(
            "warning",
            f"{summary}; {len(warnings)} warning(s); first: {warnings[0].message}",
            ("run `rocky validate` to see the warnings",),
        )
    return Finding("healthy", f"{summary}; no problems")


# --- state ----------------------------------------------------------------------------------------------


def check_state(path: Path) -> Finding:
    """The local state store opens, passes SQLite's quick check and its rows read back.

    Damaged (SQLite finds corruption, or a stored value no longer parses) is Critical: every run, tick and
    history of the project fails on it until it is restored or moved aside. A store that merely cannot be
    read by this user, or a directory that is not writable, is a Warning (seed: a degraded or unreadable
    local store does not fail the pre-flight on its own).
    """
    from rocky_engine.state.store import StateStore

    if not path.exists():
        if path.parent.exists() and not os.access(path.parent, os.W_OK):
            return Finding(
                "warning", f"no state store at {path}, and its directory is not writable",
                (f"make {path.parent} writable by the user that runs rocky",),
            )
        return Finding("healthy", f"no state store yet at {path}; the first run creates it")
    aside = f"restore a backup of {path}, or move it aside (mv {path} {path}.corrupt) to start fresh"
    from rocky_engine.state.store_errors import no_space_left

    if no_space_left(path):
        return Finding(
            "critical", f"no space left on {path.parent}, which holds the state store {path}: every run and "
            "tick fails until there is", (f"free space on {path.parent}",),
        )
    try:
        with StateStore.open(path, writer=False) as store:
            problems = [str(r[0]) for r in store.query("PRAGMA quick_check")]
            runs = int(store.query("SELECT COUNT(*) FROM run_history")[0][0])
            if problems == ["ok"]:
                _read_back(store)
    except StateSchemaError:
        return Finding("warning", f"state store at {path} is newer than this engine (see state_schema)")
    except StateDamagedError as exc:
        return Finding("critical", str(exc), (aside,))
    except StateError as exc:
        return Finding(
            "warning", f"state store is unreadable: {exc}",
            (f"check that the user running rocky can read {path}",),
        )
    if problems != ["ok"]:
        return Finding(
            "critical", f"state store at {path} is damaged: {'; '.join(problems[:3])}", (aside,),
        )
    if not os.access(path.parent, os.W_OK):
        return Finding(
            "warning", f"state store at {path} is readable but its directory is not writable",
            (f"make {path.parent} writable by the user that runs rocky",),
        )
    return Finding("healthy", f"{path} readable, {runs} run(s) recorded")


def with_upstream_store(finding: Finding, path: Path) -> Finding:
    """``finding`` of the state check, plus a warning when upstream Rocky's ``.rocky-state.redb`` sits beside
    the store: its watermarks and history are not read, which an operator moving a project must know."""
    from rocky_engine.state.location import upstream_store_beside, upstream_store_message

    redb = upstream_store_beside(path)
    if redb is None:
        return finding
    status: DoctorStatus = "critical" if finding.status == "critical" else "warning"
    return Finding(
        status, f"{finding.message}; {upstream_store_message(redb)}",
        (*finding.suggestions, f"move {redb} out of the project once you no longer need it"),
    )


def _read_back(store: StateStore) -> None:
    """Decode what the other commands read first (history's window, the scheduler's cursors and claims,
    the watermarks): damage SQLite's quick check cannot see (a timestamp overwritten with other text)
    raises StateDamagedError here rather than in the next run."""
    from rocky_engine.state.schedule import ScheduleRepo
    from rocky_engine.state.schedule_claims import ClaimRepo

    store.runs.list(limit=50)
    store.watermarks.all()
    ScheduleRepo(store).all()
    ClaimRepo(store).submitted()


def check_state_schema(path: Path, on_schema_mismatch: str) -> Finding:
    """The store's schema version against this engine's."""
    from rocky_engine.state.schema import SCHEMA_VERSION

    if not path.exists():
        return Finding("healthy", f"no state store yet; this engine writes schema version {SCHEMA_VERSION}")
    try:
        version = _file_schema_version(path)
        if version < SCHEMA_VERSION:
            from rocky_engine.state.store import StateStore

            # Opening migrates an older store, as every command's first open does (`--check state_schema`
            # alone may be the first).
            with contextlib.suppress(StateError), StateStore.open(path, writer=False):
                pass
            version = _file_schema_version(path)
    except (sqlite3.Error, ValueError, TypeError) as exc:
        return Finding("warning", f"cannot read the schema version of {path}: {exc}")
    if version == SCHEMA_VERSION:
        return Finding("healthy", f"schema version {version} (current)")
    if version < SCHEMA_VERSION:
        # Every command migrates an older store when it opens it; one still older here had a busy writer
        # (an older rocky still running against it, or a file this user cannot write).
        return Finding(
            "warning",
            f"schema version {version}, older than this engine ({SCHEMA_VERSION}): its writer was busy or "
            "the file is not writable by this user, so it was read as it is; the next command that finds "
            f"the writer free migrates it to {SCHEMA_VERSION}",
            ("stop any older rocky that still runs against this store (upgrade every rocky of the project)",),
        )
    if on_schema_mismatch == "fail":
        return Finding(
            "critical",
            f"schema version {version} is newer than this engine ({SCHEMA_VERSION}) and "
            "on_schema_mismatch = \"fail\": runs will refuse to start",
            ("upgrade rocky on this host, or restore the pre-upgrade copy of the store",),
        )
    return Finding(
        "warning",
        f"schema version {version} is newer than this engine ({SCHEMA_VERSION}); runs start from a fresh "
        "local state (on_schema_mismatch = \"recreate\")",
        ("upgrade rocky on this host so it reads the store's history and watermarks",),
    )


def _file_schema_version(path: Path) -> int:
    conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT value FROM metadata WHERE key = 'schema_version'").fetchone()
    finally:
        conn.close()
    return int(row[0]) if row is not None else 0


def check_remote_state(project: Project, name: str) -> Finding:
    """``state_rw`` (a put/get/delete probe) or ``state_concurrency`` (the overlap case, no I/O)."""
    from rocky_engine.state.remote.health import check_state_concurrency, check_state_rw

    state = project.config.state
    found = (check_state_rw(state, project.state_namespace) if name == "state_rw"
             else check_state_concurrency(state))
    return Finding(found.status, found.message, tuple(found.suggestions))


# --- pipelines ------------------------------------------------------------------------------------------


def check_pipelines(project: Project, store_file: Path, env: Mapping[str, str]) -> Finding:
    """Every transformation pipeline's models load; a pipeline whose latest run failed is a Warning."""
    from rocky_engine.state.store import StateStore

    cfg = project.config
    if not cfg.pipelines:
        return Finding("warning", "no pipelines are defined", ("add a [pipeline.<name>] table",))
    problems: list[str] = []
    failing: list[str] = []
    parts: list[str] = []
    for name, pipeline in cfg.pipelines.items():
        if pipeline.type == "transformation":
            try:
                models = project.load_models(name, env)
            except RockyError as exc:
                problems.append(f"{name}: {exc}")
                continue
            parts.append(f"{name} ({len(models)} models)")
        else:
            parts.append(f"{name} ({pipeline.type})")
    try:
        with StateStore.open(store_file, writer=False) as store:
            for name in cfg.pipelines:
                latest = store.runs.latest(name)
                if latest is not None and latest.status != "Success":
                    failing.append(f"{name}: latest run {latest.run_id} ended {latest.status}")
    except StateError:
        pass  # reported by the state checks; the pipelines themselves are still checked
    if problems:
        return Finding(
            "critical", f"{len(problems)} pipeline(s) cannot run: {'; '.join(problems)}",
            ("fix the model files; `rocky validate` reports each problem",),
        )
    if failing:
        return Finding(
            "warning", f"{len(parts)} pipeline(s); {'; '.join(failing)}",
            ("inspect the failed runs with `rocky history` and rerun once fixed",),
        )
    return Finding("healthy", f"{len(parts)} pipeline(s): {', '.join(parts)}")
