"""results.json: save one bench run's figures, read them back, and merge a partial run into earlier ones.

A run that measures only some parts (`--workloads replication,drift`, `--only startup`, one size) can be
written with `--merge`: the parts of earlier runs that this run did not measure are kept, each with the
command and machine facts of the run that measured it, so results.md never mixes figures silently.
A part is one transformation workload at one size, the startup table, the replication workload, the
drift workload, or one budget suite (dagster, tick, connector, server).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drift_workload import DriftResult, DriftRun
from harness import Sample, StartupResult, WorkloadResult
from replication_workload import PassSample, ReplicationResult
from suites import SuiteResult


@dataclass
class BenchRun:
    """Everything one invocation of run_bench.py measured."""

    command: str
    facts: dict[str, str]
    workloads: list[WorkloadResult] = field(default_factory=list)
    startup: list[StartupResult] = field(default_factory=list)
    replication: list[ReplicationResult] = field(default_factory=list)
    drift: list[DriftResult] = field(default_factory=list)
    suites: list[SuiteResult] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.workloads or self.startup or self.replication or self.drift or self.suites)

    def to_json(self) -> dict[str, Any]:
        return {
            "facts": self.facts, "command": self.command,
            "workloads": [dataclasses.asdict(w) for w in self.workloads],
            "startup": [dataclasses.asdict(s) for s in self.startup],
            "replication": [dataclasses.asdict(r) for r in self.replication],
            "drift": [dataclasses.asdict(d) for d in self.drift],
            "suites": [s.to_json() for s in self.suites],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> BenchRun:
        """Read a run back; files written before replication/drift/suites existed simply lack those keys."""
        def samples(items: list[dict[str, Any]]) -> list[Sample]:
            return [Sample(**s) for s in items]

        return cls(
            command=str(doc.get("command", "")),
            facts=dict(doc.get("facts", {})),
            workloads=[WorkloadResult(**{**w, "samples": samples(w["samples"])})
                       for w in doc.get("workloads", [])],
            startup=[StartupResult(**{**s, "samples": samples(s["samples"])})
                     for s in doc.get("startup", [])],
            replication=[ReplicationResult(**{**r, "samples": [PassSample(**s) for s in r["samples"]]})
                         for r in doc.get("replication", [])],
            drift=[DriftResult(**{**d, "runs": [DriftRun(**x) for x in d["runs"]]})
                   for d in doc.get("drift", [])],
            suites=[SuiteResult.from_json(s) for s in doc.get("suites", [])],
        )


def without(run: BenchRun, newer: BenchRun) -> BenchRun:
    """`run` minus every part that `newer` measured again."""
    remeasured = {(w.workload, w.n_models) for w in newer.workloads}
    suites = {s.workload for s in newer.suites}
    return BenchRun(
        command=run.command, facts=run.facts,
        workloads=[w for w in run.workloads if (w.workload, w.n_models) not in remeasured],
        startup=[] if newer.startup else run.startup,
        replication=[] if newer.replication else run.replication,
        drift=[] if newer.drift else run.drift,
        suites=[s for s in run.suites if s.workload not in suites],
    )


def load(path: Path) -> list[BenchRun]:
    """The runs recorded in `path`, newest first (empty when the file is missing or unreadable)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [BenchRun.from_json(doc), *(BenchRun.from_json(e) for e in doc.get("earlier", []))]


def merged_earlier(path: Path, current: BenchRun) -> list[BenchRun]:
    """The earlier runs' parts that `current` did not measure again (runs left empty are dropped)."""
    kept = [without(run, current) for run in load(path)]
    return [run for run in kept if not run.empty()]


def save(path: Path, current: BenchRun, earlier: list[BenchRun]) -> None:
    doc = current.to_json()
    if earlier:
        doc["earlier"] = [run.to_json() for run in earlier]
    path.write_text(json.dumps(doc, indent=1))


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `<path>.lock` (read-merge-write of results.json by concurrent runs)."""
    with path.with_name(f".{path.name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
