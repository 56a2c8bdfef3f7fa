"""Every JSON document of a command upstream Rocky also has validates against the published client's models
(``rocky-sdk`` 0.29.0: the hand-written ``rocky_sdk.types`` the client parses with, and the generated
``rocky_sdk.types_generated`` models of the upstream wire format).

The commands run in one sequence on one project (the house of ``test_cli_documents``, plus a drifted and an
interrupted run and a discovery with a failed source), in process for speed; each test then validates one
document against the published models and checks what it says, so a published field that is present but
wrong (a count of 0, a null watermark) fails too.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from rocky_sdk import types as sdk
from rocky_sdk.types_generated import (
    brief_schema,
    ci_schema,
    discover_schema,
    doctor_schema,
    hooks_list_schema,
    hooks_test_schema,
    load_schema,
    model_history_schema,
    run_schema,
    schedule_spool_schema,
    state_schema,
    tick_schema,
    validate_schema,
)

from rocky_engine.schedule.spool import spool_dir_of, write_demand
from tests.engine.wire.house import House
from tests.fixtures.fake_fivetran import Failure, FakeConnector, FakeFivetran, project_toml, serve
from tests.fixtures.inprocess import rocky_in_process

pytestmark = pytest.mark.slow

Check = Callable[[dict[str, Any]], None]
#: a published model, or a function validating a document against one
Validator = type[BaseModel] | Callable[[dict[str, Any]], object]


@dataclass(frozen=True)
class Step:
    """One command: its arguments, its exit code, the published models its document must validate
    against, and what the document must say."""

    name: str
    args: tuple[str, ...]
    exit_code: int
    models: tuple[Validator, ...]
    check: Check


def _status(status: str, **more: Any) -> Check:
    def check(doc: dict[str, Any]) -> None:
        assert doc["status"] == status, doc
        for key, value in more.items():
            assert doc[key] == value, (key, doc[key])
    return check


def _run_id(doc: dict[str, Any]) -> None:
    assert doc["run_id"], doc


def _drifted(doc: dict[str, Any]) -> None:
    [action] = doc["drift"]["actions_taken"]
    mats = doc["materializations"]
    [orders] = [m for m in mats if m["metadata"]["target_table_full_name"] == action["table"]]
    assert action["asset_key"] == orders["asset_key"] == ["duckdb", "shop", "orders"]
    assert action["action"] == "add_column" and action["table"] == "wh.stg__shop.orders"
    assert doc["drift"]["tables_drifted"] == 1


def _interrupted(doc: dict[str, Any]) -> None:
    assert doc["interrupted"] is True and doc["status"] == "Failure" and doc["run_id"]


def _skipped(doc: dict[str, Any]) -> None:
    assert doc["status"] == "SkippedIdempotent" and doc["skipped_by_run_id"]


def _quality(doc: dict[str, Any]) -> None:
    assert doc["check_gate_failed"] is True
    [table] = doc["check_results"]
    assert [c["passed"] for c in table["checks"]] == [False]


def _load(doc: dict[str, Any]) -> None:
    assert doc["source_dir"].endswith("data") and doc["format"] == "mixed"
    by_file = {Path(f["file"]).name: f for f in doc["files"]}
    people = by_file["people.csv"]
    assert people["rows_loaded"] == 2 and people["target"] == "wh.landing.people"
    assert by_file["broken.parquet"]["rows_loaded"] == 0 and by_file["broken.parquet"]["error"]


def _ci(doc: dict[str, Any]) -> None:
    assert doc["exit_code"] == 1 and not doc["tests_ok"] and doc["tests_failed"] == 1
    assert {d["severity"] for d in doc["diagnostics"]} <= {"Error", "Warning", "Info"}
    assert all(isinstance(d["model"], str) for d in doc["diagnostics"])
    assert doc["failures"] and len(doc["failures"]) == doc["tests_failed"]
    [failure] = doc["failures"]
    assert failure["name"] == "not_null:no_such_column on order_totals", failure
    assert "no_such_column" in failure["error"]


def _history(doc: dict[str, Any]) -> None:
    assert doc["count"] == len(doc["runs"]) > 5
    by_status = {r["status"] for r in doc["runs"]}
    assert {"Success", "PartialFailure", "Failure"} <= by_status
    models = next(r for r in doc["runs"] if r["pipeline"] == "models")
    assert [m["model_name"] for m in models["models"]] == ["order_totals"]
    assert models["models_executed"] == 1


def _model_history(doc: dict[str, Any]) -> None:
    assert doc["count"] == len(doc["executions"]) == 1
    [execution] = doc["executions"]
    assert len(execution["sql_hash"]) == 16 and execution["status"] == "success"


def _state(doc: dict[str, Any]) -> None:
    by_table = {w["table"]: w for w in doc["watermarks"]}
    orders = by_table["wh.stg__shop.orders"]
    # the newest ts of the 21 source rows (the drifted run's) is 2026-01-01 + 21 s
    assert orders["last_value"] == "2026-01-01T00:00:21Z", orders
    assert doc["schema_version_supported"] >= 1


def _spool(doc: dict[str, Any]) -> None:
    [pending] = doc["pending"]
    assert pending["pipeline"] == "snap" and pending["token"] == "d-1" and pending["kind"] == "id"
    assert doc["counts"] == {"pending": 1, "skipped": 0, "corrupt": 0}
    assert doc["spool_path"].endswith("pending-demands")


def _tick(doc: dict[str, Any]) -> None:
    outcomes = {e["pipeline"]: e["outcome"] for e in doc["executed"]}
    assert outcomes.get("broken") == "failure"


def _doctor(doc: dict[str, Any]) -> None:
    assert doc["checks"] and doc["overall"] in {"healthy", "warning"}


def _validate(doc: dict[str, Any]) -> None:
    assert doc["valid"] is True and doc["models"]["count"] == 5 and doc["models"]["found"] is True
    by_name = {p["name"]: p for p in doc["pipelines"]}
    assert by_name["raw"]["pipeline_type"] == "replication" and by_name["raw"]["strategy"] == "incremental"
    assert [(a["name"], a["adapter_type"], a["ok"]) for a in doc["adapters"]] == [("default", "duckdb", True)]


def _hooks_list(doc: dict[str, Any]) -> None:
    assert doc["total"] == 3 == len(doc["hooks"])
    assert [h["env_keys"] for h in doc["hooks"]] == [[], [], ["HOOK_TOKEN"]]


def _hooks_test(doc: dict[str, Any]) -> None:
    assert doc["status"] == "continue" and doc["event"] == "on_pipeline_complete"


def _brief(doc: dict[str, Any]) -> None:
    runs = doc["runs"]
    assert runs["total"] > 5 and runs["failed"] >= 2 and runs["partial_failure"] == runs["partial"] == 1
    assert {r["status"] for r in runs["attention"]} == {"PartialFailure", "Failure"}
    assert doc["since_mode"] == "7d" and doc["since_timestamp"] == doc["since"]
    assert doc["cost"]["run_count"] == runs["total"] and doc["cost"]["total_duration_ms"] > 0
    [event] = doc["drift"]["events"]
    assert event["change"] == "wh.stg__shop.orders: add_column (column 'note' (VARCHAR) is new in the source)"
    assert event["timestamp"]
    assert doc["quality"]["checks_failed"] >= 1
    assert doc["scheduler"]["scheduled_pipelines"] == 3 and doc["scheduler"]["incident_count"] >= 1


def _discover(doc: dict[str, Any]) -> None:
    [failed] = doc["failed_sources"]
    assert (failed["id"], failed["error_class"], failed["source_type"]) == ("conn_down", "rate_limit",
                                                                          "fivetran")
    assert [s["id"] for s in doc["sources"]] == ["conn_ok"]


def _generated_run(doc: dict[str, Any]) -> object:
    """The generated ``RunOutput``, but for ``check_results[].checks[]``: its union of check shapes requires
    numbers a check that could not be evaluated does not have (upstream writes placeholders beside
    ``not_evaluated``) and an integer ``threshold`` on every custom check; the client reads checks with
    ``rocky_sdk.types.CheckResult`` (validated by ``sdk.RunResult``), which is what a check must satisfy."""
    tables = [{**t, "checks": []} for t in doc["check_results"]]
    return run_schema.RunOutput.model_validate({**doc, "check_results": tables})


RUN: tuple[Callable[[dict[str, Any]], object], ...] = (sdk.RunResult, _generated_run)

STEPS = [
    Step("validate", ("validate",), 0, (validate_schema.ValidateOutput,), _validate),
    Step("run replication", ("run", "--pipeline", "raw"), 0, RUN, _status("Success", tables_copied=2)),
    Step("run with a key", ("run", "--pipeline", "raw", "--idempotency-key", "k1"), 0, RUN, _run_id),
    Step("run skipped by its key", ("run", "--pipeline", "raw", "--idempotency-key", "k1"), 0, RUN, _skipped),
    Step("run drifted", ("run", "--pipeline", "raw"), 0, RUN, _drifted),
    Step("run transformation", ("run", "--pipeline", "models"), 0, RUN, _status("Success")),
    Step("run partial", ("run", "--pipeline", "partial"), 2, RUN, _status("PartialFailure")),
    Step("run failure", ("run", "--pipeline", "broken"), 1, RUN, _status("Failure")),
    Step("run quality", ("run", "--pipeline", "dq"), 1, RUN, _quality),
    Step("run snapshot", ("run", "--pipeline", "snap"), 0, RUN, _status("Success")),
    Step("run interrupted", ("run", "--pipeline", "slow"), 130, RUN, _interrupted),
    Step("load", ("load", "--pipeline", "files"), 2, (load_schema.LoadOutput,), _load),
    Step("ci", ("ci",), 1, (ci_schema.CiOutput, sdk.CiResult), _ci),
    Step("history", ("history",), 0, (sdk.HistoryResult,), _history),
    Step("history --model", ("history", "--model", "order_totals"), 0,
         (model_history_schema.ModelHistoryOutput, sdk.ModelHistoryResult), _model_history),
    Step("state", ("state",), 0, (sdk.StateResult, state_schema.StateOutput), _state),
    Step("state schedule spool", ("state", "schedule", "spool"), 0,
         (schedule_spool_schema.ScheduleSpoolOutput,), _spool),
    Step("tick", ("tick",), 2, (sdk.TickResult, tick_schema.TickOutput), _tick),
    Step("doctor", ("doctor",), 0, (sdk.DoctorResult, doctor_schema.DoctorOutput), _doctor),
    Step("brief", ("brief", "--since", "7d"), 0, (brief_schema.BriefOutput,), _brief),
    Step("hooks list", ("hooks", "list"), 0, (hooks_list_schema.HooksListOutput,), _hooks_list),
    Step("hooks test", ("hooks", "test", "on_pipeline_complete"), 0, (hooks_test_schema.HooksTestOutput,),
         _hooks_test),
]

def _slow_pipeline(pid: int) -> str:
    """A pipeline whose start hook sends this test process (the in-process ``rocky``) SIGTERM: the same
    stop a signal to a ``rocky`` process makes, at a known point and without a sleep."""
    return textwrap.dedent(f"""
        [pipeline.slow]
        type = "transformation"
        models = "models/slow/**"

        # fails in CI (the column does not exist); a warning, so the real run still succeeds
        [[pipeline.models.checks.assertions]]
        table = "order_totals"
        type = "not_null"
        column = "no_such_column"
        severity = "warning"

        [[hook.on_pipeline_start]]
        command = "[ \\"$ROCKY_PIPELINE\\" = slow ] && kill -TERM {pid}; true"
    """)


@dataclass
class Documents:
    results: dict[str, tuple[int, dict[str, Any]]]


def _document(house: House, *args: str) -> tuple[int, dict[str, Any]]:
    res = rocky_in_process(["-c", str(house.config), "--state-path", str(house.state_path), *args,
                            "--output", "json"], deadline_seconds=120)
    assert res.stdout.strip(), f"rocky {' '.join(args)} printed nothing: {res.stderr[-2000:]}"
    doc = json.loads(res.stdout)
    assert isinstance(doc, dict)
    return res.returncode, doc


def _before(house: House, step: str) -> None:
    """What the project must look like before ``step`` runs."""
    if step == "run drifted":
        # a new source column (drift: add_column) and one new row (the watermark moves to +21 s)
        house.sql(
            "ALTER TABLE src__shop.orders ADD COLUMN note VARCHAR",
            "INSERT INTO src__shop.orders VALUES (21, 2, 'open', 31.5, NULL, "
            "TIMESTAMP '2026-01-01' + to_seconds(21), 'late')",
        )
    elif step == "state schedule spool":
        write_demand(spool_dir_of(house.root / ".rocky"), pipeline="snap", body=b'{"why": "test"}',
                     delivery_id="d-1", now=datetime.now(UTC))


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Documents:
    house = House(tmp_path_factory.mktemp("house")).build()
    with house.config.open("a") as f:
        f.write(_slow_pipeline(os.getpid()))
    (house.root / "models" / "slow").mkdir()
    (house.root / "models" / "slow" / "spin.sql").write_text("SELECT 1 AS x\n")
    results = {}
    for step in STEPS:
        _before(house, step.name)
        results[step.name] = _document(house, *step.args)
    return Documents(results)


@pytest.mark.parametrize("step", STEPS, ids=[s.name for s in STEPS])
def test_document_validates_against_the_published_models(documents: Documents, step: Step) -> None:
    code, doc = documents.results[step.name]
    assert code == step.exit_code, doc
    for model in step.models:
        if isinstance(model, type):
            model.model_validate(doc)
        else:
            model(doc)
    if doc["command"] in DISPATCHED:  # the client's own dispatch on "command" picks the right model
        sdk.parse_rocky_output(json.dumps(doc))
    step.check(doc)


#: the commands ``rocky_sdk.parse_rocky_output`` dispatches (the others are read by their model directly)
DISPATCHED = frozenset(
    {"run", "discover", "history", "state", "state-schedule-spool", "ci", "tick", "doctor"}
)


def test_discover_with_a_failed_source_validates(tmp_path: Path) -> None:
    fake = FakeFivetran()
    fake.add(FakeConnector("conn_ok", "src__acme__shopify", succeeded_at="2026-05-01T10:00:00Z"))
    fake.add(FakeConnector("conn_down", "src__acme__stripe", service="stripe"))
    fake.schema_failures["conn_down"] = Failure(status=429, headers={"Retry-After": "120"})
    with serve(fake) as base_url:
        (tmp_path / "rocky.toml").write_text(project_toml(fake, base_url))
        res = rocky_in_process(["-c", str(tmp_path / "rocky.toml"), "--output", "json", "discover"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    sdk.DiscoverResult.model_validate(doc)
    discover_schema.DiscoverOutput.model_validate(doc)
    _discover(doc)


def test_a_missing_published_field_fails_validation(documents: Documents) -> None:
    """What this file guards: a document without a field the published client requires does not read."""
    from pydantic import ValidationError

    _, doc = documents.results["history"]
    with pytest.raises(ValidationError, match="count"):
        sdk.HistoryResult.model_validate({k: v for k, v in doc.items() if k != "count"})
