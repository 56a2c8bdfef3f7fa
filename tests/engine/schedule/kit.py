"""Shared helpers for the scheduler tests: projects on disk, a settable clock, a child that plays `rocky run`.

``SimChild`` is the injected spawner of the library tests. It does what a real child does to the state
store (opens it as the writer, which fails if the reconciler kept it open, and records a run with the
submission id) without warehouse work, so hundreds of ticks stay fast and deterministic.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rocky_engine.project import Project, load_project
from rocky_engine.schedule.reconciler import Reconciler, ReconcilerOptions
from rocky_engine.schedule.spawner import ChildRequest, ChildResult
from rocky_engine.state import RunRecord, StateStore
from tests.fixtures.projects import ROCKY, child_env

T0 = datetime(2026, 5, 2, 3, 0, tzinfo=UTC)

HEADER = """
[adapter]
type = "duckdb"
path = "warehouse.duckdb"
"""


def write_project(root: Path, body: str, models: dict[str, str] | None = None) -> Path:
    """rocky.toml (adapter header + ``body``) and optional model files; returns the config path."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "rocky.toml"
    config.write_text(HEADER + body, encoding="utf-8")
    for name, text in (models or {}).items():
        path = root / "models" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return config


def project_at(root: Path, body: str, models: dict[str, str] | None = None) -> Project:
    return load_project(write_project(root, body, models), env={})


def transformation(name: str, schedule: str = "", extra: str = "") -> str:
    """A transformation pipeline table (its schedule lines go in ``[pipeline.NAME.schedule]``)."""
    text = f'\n[pipeline.{name}]\ntype = "transformation"\nmodels = "models/**"\n{extra}'
    if schedule:
        text += f"\n[pipeline.{name}.schedule]\n{schedule}\n"
    return text


@dataclass
class Clock:
    """A settable UTC clock; ``advance`` moves it."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> datetime:
        self.now = self.now + timedelta(**kwargs)
        return self.now

    def set(self, value: datetime) -> datetime:
        self.now = value
        return value


@dataclass
class SimChild:
    """Plays ``rocky run``: records a run with the submission id; exit codes scripted per pipeline.

    Each child run takes one simulated second (the clock moves), as a real run would, so an upstream
    finishes before its downstream starts.
    """

    clock: Clock
    #: pipeline -> exit codes for successive runs (the last one repeats); default 0
    codes: dict[str, list[int]] = field(default_factory=dict)
    calls: list[ChildRequest] = field(default_factory=list)
    #: set to record nothing (a child that died before writing its run)
    record: bool = True
    on_run: Callable[[ChildRequest], None] | None = None

    def run(self, request: ChildRequest, on_start: Callable[[int], None] | None = None) -> ChildResult:
        self.calls.append(request)
        if self.on_run is not None:
            self.on_run(request)
        script = self.codes.get(request.pipeline, [0])
        code = script.pop(0) if len(script) > 1 else script[0]
        started = self.clock.now
        finished = self.clock.advance(seconds=1)
        if self.record:
            status = {0: "Success", 2: "PartialFailure"}.get(code, "Failure")
            # Opening as the writer proves the reconciler closed the store while its child runs.
            with StateStore.open(request.state_path) as store:
                store.runs.insert(
                    RunRecord(
                        run_id=store.runs.new_run_id(started),
                        pipeline=request.pipeline,
                        started_at=started,
                        finished_at=finished,
                        status=status,
                        trigger=request.trigger.capitalize(),
                        submission_id=request.submission_id,
                        exit_code=code,
                    )
                )
        return ChildResult(code)

    def pipelines(self) -> list[str]:
        return [c.pipeline for c in self.calls]


def reconciler(clock: Clock, child: SimChild, **options: Any) -> Reconciler:
    return Reconciler(spawner=child, clock=clock, options=ReconcilerOptions(**options))


def record_run(
    project: Project,
    pipeline: str,
    status: str,
    started: datetime,
    finished: datetime | None = None,
    submission_id: str | None = None,
) -> str:
    with StateStore.open(project.state_path()) as store:
        run_id = store.runs.new_run_id(started)
        store.runs.insert(
            RunRecord(
                run_id=run_id,
                pipeline=pipeline,
                started_at=started,
                finished_at=finished or started + timedelta(seconds=1),
                status=status,
                submission_id=submission_id,
            )
        )
    return run_id


def rocky(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROCKY, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=child_env(env)
    )


def tick_json(cwd: Path, *args: str) -> tuple[int, dict[str, Any]]:
    proc = rocky(cwd, "tick", "--output", "json", *args)
    assert proc.stdout, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return proc.returncode, doc


def sources(doc: Any, pipeline: str) -> dict[str, str]:
    """source -> reason of one pipeline in a tick output (TickOutput or its JSON)."""
    evaluated = doc["evaluated"] if isinstance(doc, dict) else [e.wire() for e in doc.evaluated]
    for entry in evaluated:
        if entry["pipeline"] == pipeline:
            return {s["source"]: s["reason"] for s in entry["sources"]}
    raise AssertionError(f"{pipeline} not evaluated")
