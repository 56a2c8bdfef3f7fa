"""Every JSON document the CLI prints validates strictly against its wire model (no key the model does not
declare, every always-written key present, read-then-written unchanged), one test per command and outcome.

The commands run in one sequence on one project (a run leaves what ``history``, ``tick`` and ``brief``
report), each as a real ``rocky`` subprocess; each test then checks one of the documents and its exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rocky_engine.schedule.spool import spool_dir_of, write_demand
from rocky_engine.wire.base import WireModel
from rocky_engine.wire.brief import BriefResult
from rocky_engine.wire.checks import ASSERTION_MODELS, AssertionCheck, CheckResult
from rocky_engine.wire.ci import CiResult
from rocky_engine.wire.dag import DagResult
from rocky_engine.wire.discover import DiscoverResult
from rocky_engine.wire.doctor import DoctorResult
from rocky_engine.wire.history import HistoryResult, ModelHistoryResult
from rocky_engine.wire.hooks import HooksListResult, HooksTestResult
from rocky_engine.wire.load import LoadResult
from rocky_engine.wire.run import RunResult
from rocky_engine.wire.spool import SpoolResult
from rocky_engine.wire.state import ScheduleHoldResult, WatermarksResult
from rocky_engine.wire.tick import TickResult
from rocky_engine.wire.validate import ValidateResult
from tests.engine.wire.house import House
from tests.engine.wire.strict import assert_strict
from tests.fixtures.projects import Cli

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Step:
    """One command of the sequence: its arguments, the model its document must match, its exit code."""

    name: str
    args: tuple[str, ...]
    model: type[WireModel]
    exit_code: int


STEPS = [
    Step("validate", ("validate",), ValidateResult, 0),
    Step("discover", ("discover",), DiscoverResult, 0),
    Step("dag", ("dag",), DagResult, 0),
    Step("run replication", ("run", "--pipeline", "raw"), RunResult, 0),
    Step("run with a key", ("run", "--pipeline", "raw", "--idempotency-key", "k1"), RunResult, 0),
    Step("run skipped by its key", ("run", "--pipeline", "raw", "--idempotency-key", "k1"), RunResult, 0),
    Step("run transformation", ("run", "--pipeline", "models"), RunResult, 0),
    Step("run partial", ("run", "--pipeline", "partial"), RunResult, 2),
    Step("run failure", ("run", "--pipeline", "broken"), RunResult, 1),
    Step("run quality gate", ("run", "--pipeline", "dq"), RunResult, 1),
    Step("run snapshot", ("run", "--pipeline", "snap"), RunResult, 0),
    Step("run load pipeline", ("run", "--pipeline", "files"), LoadResult, 2),
    Step("load", ("load", "--pipeline", "files"), LoadResult, 2),
    Step("ci", ("ci",), CiResult, 1),
    Step("history", ("history",), HistoryResult, 0),
    Step("history --model", ("history", "--model", "order_totals"), ModelHistoryResult, 0),
    Step("history --audit", ("history", "--audit"), HistoryResult, 0),
    Step("state", ("state",), WatermarksResult, 0),
    Step("state schedule pause", ("state", "schedule", "pause", "raw"), ScheduleHoldResult, 0),
    Step("state schedule resume", ("state", "schedule", "resume", "raw"), ScheduleHoldResult, 0),
    Step("state schedule spool", ("state", "schedule", "spool"), SpoolResult, 0),
    Step("tick --dry-run", ("tick", "--dry-run"), TickResult, 0),
    Step("tick", ("tick",), TickResult, 2),
    Step("doctor", ("doctor",), DoctorResult, 0),
    Step("brief", ("brief", "--since", "7d"), BriefResult, 0),
    Step("hooks list", ("hooks", "list"), HooksListResult, 0),
    Step("hooks test", ("hooks", "test", "on_pipeline_complete"), HooksTestResult, 0),
]


@dataclass
class Sequence:
    house: House
    results: dict[str, Cli]
    #: what the spool file looked like before the tick consumed it
    spool_files: list[str]


@pytest.fixture(scope="module")
def sequence(tmp_path_factory: pytest.TempPathFactory) -> Sequence:
    root = tmp_path_factory.mktemp("house")
    house = House(root).build()
    results: dict[str, Cli] = {}
    spool_files: list[str] = []
    for step in STEPS:
        if step.name == "state schedule spool":
            spool = spool_dir_of(root / ".rocky")
            write_demand(spool, pipeline="snap", body=b'{"why": "test"}', delivery_id="d-1",
                         now=datetime.now(UTC))
            spool_files = [p.read_text() for p in sorted(spool.glob("*.json"))]
        results[step.name] = house.rocky(*step.args)
    return Sequence(house, results, spool_files)


@pytest.mark.parametrize("step", STEPS, ids=[s.name for s in STEPS])
def test_document_validates_strictly(sequence: Sequence, step: Step) -> None:
    res = sequence.results[step.name]
    assert res.returncode == step.exit_code, res.stderr[-3000:]
    parsed = assert_strict(res.json, step.model)
    if step.name in CHECKED:
        CHECKED[step.name](parsed)


# What each document is about (so a strict pass on an empty document cannot hide a broken command).
CHECKED: dict[str, Callable[[WireModel], None]] = {}


def checked(name: str) -> Callable[[Callable[[WireModel], None]], Callable[[WireModel], None]]:
    def register(fn: Callable[[WireModel], None]) -> Callable[[WireModel], None]:
        CHECKED[name] = fn
        return fn

    return register


@checked("run replication")
def _replication(doc: WireModel) -> None:
    assert isinstance(doc, RunResult)
    assert doc.status == "Success" and doc.tables_copied == 2 and not doc.check_gate_failed
    kinds = {type(c) for table in doc.check_results for c in table.checks}
    # every check kind the engine has is in this document, so each model was checked strictly
    builtin = {cls for cls in CheckResult.__subclasses__() if cls.TAG != "unknown"}  # not UnknownCheck
    expected = set(ASSERTION_MODELS) | builtin - {AssertionCheck}
    assert kinds == expected, sorted(c.__name__ for c in expected - kinds)


@checked("dag")
def _dag(doc: WireModel) -> None:
    from rocky_sdk.types_generated.dag_schema import DagOutput

    assert isinstance(doc, DagResult)
    kinds = doc.summary.counts_by_kind
    assert kinds.get("replication", 0) >= 2 and kinds.get("transformation", 0) >= 2, kinds
    # the published client reads the same document
    published = DagOutput.model_validate(doc.wire())
    assert [n.id for n in published.nodes] == [n.id for n in doc.nodes]


@checked("run skipped by its key")
def _skipped(doc: WireModel) -> None:
    assert isinstance(doc, RunResult) and doc.status == "SkippedIdempotent" and doc.skipped_by_run_id


@checked("run transformation")
def _transformation(doc: WireModel) -> None:
    assert isinstance(doc, RunResult) and doc.materializations and doc.check_results


@checked("run partial")
def _partial(doc: WireModel) -> None:
    assert isinstance(doc, RunResult) and doc.status == "PartialFailure" and doc.errors


@checked("run failure")
def _failure(doc: WireModel) -> None:
    assert isinstance(doc, RunResult) and doc.status == "Failure" and doc.errors and not doc.materializations


@checked("run quality gate")
def _quality(doc: WireModel) -> None:
    assert isinstance(doc, RunResult) and doc.check_gate_failed and doc.pipeline_type == "quality"


@checked("run snapshot")
def _snapshot(doc: WireModel) -> None:
    assert isinstance(doc, RunResult)
    [mat] = doc.materializations
    assert (mat.metadata.rows_inserted, mat.metadata.rows_closed) == (5, 0)


@checked("load")
def _load(doc: WireModel) -> None:
    assert isinstance(doc, LoadResult) and doc.files_loaded == 1 and doc.files_failed == 1


@checked("history --audit")
def _audit(doc: WireModel) -> None:
    assert isinstance(doc, HistoryResult) and doc.runs and all(r.hostname for r in doc.runs)


@checked("history --model")
def _model_history(doc: WireModel) -> None:
    assert isinstance(doc, ModelHistoryResult) and doc.executions


@checked("state")
def _state(doc: WireModel) -> None:
    assert isinstance(doc, WatermarksResult) and doc.watermarks


@checked("state schedule spool")
def _spool(doc: WireModel) -> None:
    assert isinstance(doc, SpoolResult) and [d.delivery_id for d in doc.demands] == ["d-1"]


@checked("tick")
def _tick(doc: WireModel) -> None:
    assert isinstance(doc, TickResult)
    outcomes = {e.pipeline: e.outcome for e in doc.executed}
    assert outcomes.get("broken") == "failure"
    assert all(e.incident for e in doc.executed if e.outcome != "success")


@checked("brief")
def _brief(doc: WireModel) -> None:
    assert isinstance(doc, BriefResult)
    assert doc.runs.availability == "available" and doc.scheduler.availability == "available"
    assert doc.scheduler.incident_count and doc.quality.checks_failed


@checked("hooks list")
def _hooks(doc: WireModel) -> None:
    assert isinstance(doc, HooksListResult) and [h.env for h in doc.hooks] == [[], ["HOOK_TOKEN"]]


def test_the_spool_file_validates_strictly(sequence: Sequence) -> None:
    import json

    from rocky_engine.wire.spool import SpoolDemandFile

    [text] = sequence.spool_files
    doc = assert_strict(json.loads(text), SpoolDemandFile)
    assert doc.delivery_id == "d-1" and doc.pipeline == "snap"


def test_incident_bundles_validate_strictly(sequence: Sequence) -> None:
    import json

    from rocky_engine.wire.incident import IncidentDocument

    bundles = sorted((sequence.house.root / ".rocky" / "incidents").glob("*.json"))
    assert bundles
    for path in bundles:
        doc = assert_strict(json.loads(path.read_text()), IncidentDocument)
        assert doc.outcome == "failure" and doc.pointers


def test_hook_contexts_on_stdin_validate_strictly(sequence: Sequence) -> None:
    from rocky_engine.wire.checks import TableCheckResult
    from rocky_engine.wire.hooks import HookContext

    contexts = sequence.house.hook_contexts()
    assert {c["event"] for c in contexts} >= {"pipeline_complete", "check_result"}
    for raw in contexts:
        ctx = assert_strict(raw, HookContext)
        if ctx.event == "check_result":
            # the checks a hook receives are the run document's check results
            table = {"asset_key": ctx.metadata["asset_key"], "checks": ctx.metadata["checks"]}
            assert_strict(table, TableCheckResult)


def test_a_renamed_engine_field_fails_the_strict_reading(sequence: Sequence, tmp_path: Path) -> None:
    """What the strict reading guards against: a key the wire model does not know, or one it always writes
    gone missing (an engine field renamed without its wire model), fails, at any depth."""
    doc = sequence.results["run replication"].json
    renamed = {**doc, "tables_copied_total": doc["tables_copied"]}
    del renamed["tables_copied"]
    with pytest.raises(AssertionError, match="tables_copied"):
        assert_strict(renamed, RunResult)
    mats = []
    for mat in doc["materializations"]:
        moved = {k: v for k, v in mat.items() if k != "rows_copied"}
        mats.append({**moved, "rows": mat["rows_copied"]})
    nested = {**doc, "materializations": mats}
    with pytest.raises(AssertionError, match="keys the model does not declare: \\['rows'\\]"):
        assert_strict(nested, RunResult)
