"""Streaming: ``rocky.events`` lines on the engine's stderr become Dagster events while the engine runs.

The engine here is a stand-in process (a Python script) that writes real event lines built with the wire
model (``RunEvent``) in the engine's log-line format, then WAITS until Dagster has recorded the first event
before it finishes: the run can only end if that event reached Dagster while the process was still alive.
The same parsing runs on the real engine's lines in tests/dagster/test_models.py.
"""

import json
import logging
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dagster_rocky import RockyResource
from dagster_rocky.models import build_rocky_model_assets
from dagster_rocky.streaming import parse_event_line
from dagster_rocky.types import DagResult, RunEvent, RunResult

WAIT = (
    ["--wait-for-lock", str(RockyResource().wait_for_lock_seconds)]
    if RockyResource().wait_for_lock_seconds
    else []
)
STG = ["playground", "staging", "stg_orders"]
FCT = ["playground", "marts", "fct_orders"]


def event_line(**fields: Any) -> str:
    """One stderr line as the engine writes it: the log line keys plus the RunEvent fields."""
    base = {"ts": datetime.now(UTC), "pipeline": "models", "kind": "model", "run_id": "run-1"}
    event = RunEvent.model_validate({**base, **fields})
    return event.model_dump_json()


def run_document(**fields: Any) -> str:
    return RunResult.model_validate({"run_id": "run-1", **fields}).model_dump_json(by_alias=True)


def make_engine(
    tmp_path: Path, lines: list[str], document: str, code: int = 0, handshake: bool = True
) -> str:
    """A stand-in ``rocky`` that records its argv, writes ``lines`` on stderr, waits for Dagster to have
    recorded the first event (the handshake file), then prints ``document`` and exits ``code``."""
    script = tmp_path / "rocky-standin"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import json, os, sys, time
            with open({str(tmp_path / "argv.jsonl")!r}, "a") as f:
                f.write(json.dumps(sys.argv[1:]) + "\\n")
            lines = {lines!r}
            for i, line in enumerate(lines):
                sys.stderr.write(line + "\\n")
                sys.stderr.flush()
                if i == 0 and {handshake!r}:
                    deadline = time.monotonic() + 30
                    while not os.path.exists({str(tmp_path / "seen")!r}):
                        if time.monotonic() > deadline:
                            sys.stderr.write("error: the first event never reached Dagster\\n")
                            sys.exit(1)
                        time.sleep(0.01)
            sys.stdout.write({document!r})
            sys.exit({code})
            """
        )
    )
    script.chmod(0o755)
    return str(script)


class _Seen(logging.Handler):
    """Creates the handshake file when Dagster records its first materialization or check evaluation."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "dagster_meta", {}).get("dagster_event")
        if event is not None and event.event_type_value in (
            "ASSET_MATERIALIZATION",
            "ASSET_CHECK_EVALUATION",
        ):
            self.path.touch()


@pytest.fixture
def seen(tmp_path: Path) -> Path:
    return tmp_path / "seen"


def materialize_watched(
    assets: list[Any],
    selection: list[dg.AssetKey] | None,
    resources: dict[str, Any],
    seen: Path,
    raise_on_error: bool = True,
) -> dg.ExecuteInProcessResult:
    """``dg.materialize`` with a Dagster logger that sees every event as Dagster records it."""
    logger = logging.getLogger(f"rocky-seen-{seen.parent.name}")
    logger.handlers = [_Seen(seen)]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False

    @dg.logger
    def watch(_: Any) -> logging.Logger:
        return logger

    defs = dg.Definitions(assets=assets, resources=resources, loggers={"watch": watch})
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        asset_selection=selection,
        run_config={"loggers": {"watch": {}}},
        raise_on_error=raise_on_error,
    )


def test_parse_event_line_reads_events_and_ignores_other_lines() -> None:
    line = event_line(event="materialized", name="stg_orders", asset_key=STG, row_count=5, rows_copied=2)
    event = parse_event_line(line)
    assert event is not None and event.asset_key == STG and event.row_count == 5
    assert parse_event_line('{"ts": "x", "level": "info", "target": "rocky.run", "message": "hi"}') is None
    assert parse_event_line("info: plain text") is None
    assert parse_event_line('{"target": "rocky.events", "event": "materialized"}') is None  # unreadable


@pytest.fixture
def dag(playground_dag: DagResult) -> DagResult:
    return playground_dag


def _selection() -> list[dg.AssetKey]:
    return [dg.AssetKey(STG), dg.AssetKey(FCT)]


def test_model_events_reach_dagster_while_the_engine_runs(tmp_path: Path, seen: Path, dag: DagResult) -> None:
    lines = [
        event_line(
            event="materialized",
            name="stg_orders",
            asset_key=STG,
            row_count=120,
            rows_copied=20,
            duration_ms=7,
        ),
        '{"ts": "2026-01-01T00:00:00Z", "level": "info", "target": "rocky.run", "message": "building fct"}',
        event_line(
            event="drift",
            name="fct_orders",
            asset_key=FCT,
            drift={"action": "add_columns", "reason": "new column", "columns": ["note"]},
        ),
        event_line(event="materialized", name="fct_orders", asset_key=FCT, row_count=99, rows_copied=99),
        event_line(
            event="check",
            name="fct_orders",
            asset_key=FCT,
            check={"name": "row_count", "kind": "row_count", "passed": True, "observed": 99.0},
        ),
    ]
    doc = run_document(
        materializations=[{"asset_key": STG, "rows_copied": 20}, {"asset_key": FCT, "rows_copied": 99}]
    )
    rocky = RockyResource(binary_path=make_engine(tmp_path, lines, doc), config_path="rocky.toml")
    assets = build_rocky_model_assets(dag, pool=None)
    result = materialize_watched(assets, _selection(), {"rocky": rocky}, seen)
    assert result.success
    # ONE engine process for the two selected models, each named with --model; then fct_orders's quality
    # assertions (selected with it) run their own pipeline
    argvs = [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]
    assert [a[a.index("run") :] for a in argvs] == [
        ["run", "--pipeline", "models", "--model", "stg_orders", "--model", "fct_orders", *WAIT],
        ["run", "--pipeline", "quality", *WAIT],
    ]
    mats = {
        e.asset_key: {k: v.value for k, v in e.event_specific_data.materialization.metadata.items()}  # type: ignore[union-attr]
        for e in result.get_asset_materialization_events()
    }
    assert set(mats) == set(_selection())  # one each: the document did not add a second
    stg = mats[dg.AssetKey(STG)]
    assert stg["dagster/row_count"] == 120  # rows in the table after the run
    assert stg["rocky/rows_copied"] == 20
    assert mats[dg.AssetKey(FCT)]["rocky/drift"] == [
        {"action": "add_columns", "reason": "new column", "columns": ["note"]}
    ]
    observations = [e for e in result.all_events if e.event_type_value == "ASSET_OBSERVATION"]
    assert [o.asset_key for o in observations] == [dg.AssetKey(FCT)]
    obs = observations[0].event_specific_data.asset_observation  # type: ignore[union-attr]
    assert obs.metadata["rocky/drift_action"].value == "add_columns"


def test_a_failed_model_fails_the_step_after_the_others_are_reported(
    tmp_path: Path, seen: Path, dag: DagResult
) -> None:
    lines = [
        event_line(event="materialized", name="stg_orders", asset_key=STG, row_count=1),
        event_line(event="failed", name="fct_orders", asset_key=FCT, error="Binder Error: no column x"),
    ]
    doc = run_document(
        status="PartialFailure",
        materializations=[{"asset_key": STG}],
        errors=[{"asset_key": FCT, "error": "Binder Error: no column x", "failure_kind": "query-rejected"}],
    )
    rocky = RockyResource(binary_path=make_engine(tmp_path, lines, doc, code=2), config_path="rocky.toml")
    result = materialize_watched(
        build_rocky_model_assets(dag, pool=None), _selection(), {"rocky": rocky}, seen, raise_on_error=False
    )
    assert not result.success
    assert [e.asset_key for e in result.get_asset_materialization_events()] == [dg.AssetKey(STG)]
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.event_specific_data.error  # type: ignore[union-attr]
    assert "playground/marts/fct_orders (query-rejected): Binder Error: no column x" in error.message


def test_quota_exceeded_asks_dagster_to_retry_after_the_cooldown(tmp_path: Path, dag: DagResult) -> None:
    doc = run_document(
        status="Failure",
        errors=[
            {
                "asset_key": STG,
                "error": "429 Too Many Requests",
                "failure_kind": "quota-exceeded",
                "cooldown_seconds": 1,
            }
        ],
    )
    engine = make_engine(
        tmp_path, ['{"level": "info", "target": "rocky.run", "message": "x"}'], doc, 1, False
    )
    rocky = RockyResource(binary_path=engine, config_path="rocky.toml")
    result = dg.materialize(
        build_rocky_model_assets(dag, pool=None),
        selection=[dg.AssetKey(STG)],
        resources={"rocky": rocky},
        raise_on_error=False,
    )
    assert not result.success
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert len(retries) == 1
    assert retries[0].event_specific_data.seconds_to_wait == 1  # type: ignore[union-attr]
    assert len((tmp_path / "argv.jsonl").read_text().splitlines()) == 2  # retried once, by Dagster


def test_run_streaming_yields_events_in_a_users_own_asset(tmp_path: Path, seen: Path) -> None:
    lines = [event_line(event="materialized", name="stg_orders", asset_key=STG, row_count=3)]
    rocky = RockyResource(
        binary_path=make_engine(tmp_path, lines, run_document(materializations=[{"asset_key": STG}])),
        config_path="rocky.toml",
    )

    @dg.multi_asset(specs=[dg.AssetSpec(dg.AssetKey(STG))])
    def mine(context: dg.AssetExecutionContext, rocky: RockyResource) -> Iterator[Any]:
        stream = rocky.run_streaming(context, pipeline="models", model="stg_orders")
        yield from stream
        assert stream.result.run_id == "run-1"
        assert stream.materializations[0].asset_key == STG  # RunResult attributes, as published

    result = materialize_watched([mine], None, {"rocky": rocky}, seen)
    assert result.success
    (mat,) = result.get_asset_materialization_events()
    assert mat.event_specific_data.materialization.metadata["dagster/row_count"].value == 3  # type: ignore[union-attr]
