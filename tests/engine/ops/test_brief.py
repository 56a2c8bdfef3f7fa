"""``rocky brief`` on a state store holding successes, partial failures and failures."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rocky_sdk.types_generated import brief_schema

from rocky_engine.errors import UsageError
from rocky_engine.ops.brief import CURSOR_KEY, build_brief, parse_since
from rocky_engine.project import load_project
from rocky_engine.state.check_history import CheckRecord
from rocky_engine.state.runs import ModelExecution, RunRecord
from rocky_engine.state.store import StateStore
from tests.engine.hooks.kit import make_project, rocky

NOW = datetime(2026, 5, 2, 3, 0, tzinfo=UTC)
EXTRA = """
[freshness]
expected_lag_seconds = 3600

[pipeline.raw]
type = "quality"
tables = [{ catalog = "wh", schema = "raw" }]
[pipeline.raw.checks]
row_count = true
[pipeline.raw.schedule]
freshness = true
"""


def _run(run_id: str, pipeline: str, status: str, hours_ago: float, **extra: object) -> RunRecord:
    started = NOW - timedelta(hours=hours_ago)
    models = extra.pop("models", [])
    assert isinstance(models, list)
    return RunRecord(
        run_id=run_id, pipeline=pipeline, pipeline_type="transformation", started_at=started,
        finished_at=started + timedelta(minutes=2), status=status, duration_ms=120_000,
        models_executed=[ModelExecution(model_name=m, started_at=started, status=s) for m, s in models],
        extra=dict(extra),
    )


@pytest.fixture()
def estate(tmp_path: Path) -> Path:
    config = make_project(tmp_path, extra_toml=EXTRA, seed=False)
    with StateStore.open(tmp_path / "models" / ".rocky-state.db") as store:
        store.runs.insert_many([
            _run("run-old", "models", "Failure", 30),  # outside the 24h window
            _run("run-ok-1", "models", "Success", 20, models=[("good", "success")]),
            _run("run-partial", "models", "PartialFailure", 10,
                 models=[("good", "success"), ("fct_orders", "failed")],
                 errors=[{"asset_key": ["wh", "main", "fct_orders"], "error": "Binder Error: column x",
                          "failure_kind": "query-rejected"}]),
            _run("run-fail", "models", "Failure", 5, models=[("good", "failed")]),
            _run("run-raw", "raw", "PartialFailure", 4, check_gate_failed=True,
                 drift={"tables_checked": 3, "tables_drifted": 1,
                        "actions_taken": [{"table": "wh.raw.orders", "action": "add_column",
                                           "reason": "new column note"}]}),
            _run("run-ok-2", "models", "Success", 1, models=[("good", "success")]),
        ])
        store.checks.record_many(
            [
                CheckRecord(run_id="run-raw", table_key="wh.raw.orders", check_name="row_count", passed=True,
                            value=2, severity="error"),
                CheckRecord(run_id="run-raw", table_key="wh.raw.orders", check_name="not_null_id",
                            passed=False, severity="error"),
            ],
            now=NOW - timedelta(hours=4),
        )
        store.checks.record_many(
            [CheckRecord(run_id="run-old", table_key="wh.raw.orders", check_name="unique_id", passed=False)],
            now=NOW - timedelta(hours=30),
        )
    return config


def test_brief_json_sections(estate: Path) -> None:
    brief = build_brief(load_project(estate), since_spec="24h", now=NOW)
    doc = brief.wire()
    assert doc["command"] == "brief" and doc["window"] == "24h"
    assert doc["since"] == "2026-05-01T03:00:00.000Z" and doc["generated_at"] == "2026-05-02T03:00:00.000Z"
    runs = doc["runs"]
    assert (runs["availability"], runs["total"], runs["succeeded"], runs["partial"], runs["failed"]) == (
        "available", 5, 2, 2, 1)
    by_pipeline = {p["pipeline"]: p for p in runs["pipelines"]}
    assert by_pipeline["models"] == {"pipeline": "models", "total": 4, "succeeded": 2, "partial": 1,
                                     "failed": 1, "last_status": "Success", "last_run_id": "run-ok-2"}
    failures = {f["run_id"]: f for f in runs["failures"]}
    assert list(failures) == ["run-raw", "run-fail", "run-partial"]  # newest first
    assert failures["run-partial"]["failed_models"] == ["wh.main.fct_orders"]
    assert failures["run-partial"]["error"] == "Binder Error: column x"
    assert failures["run-fail"]["failed_models"] == ["good"]
    assert failures["run-raw"]["error"] == "an error-severity check failed"
    drift = doc["drift"]
    assert drift["tables_drifted"] == 1
    assert drift["events"] == [{"run_id": "run-raw", "table": "wh.raw.orders", "action": "add_column",
                                "reason": "new column note", "pipeline": "raw",
                                "change": "wh.raw.orders: add_column (new column note)",
                                "timestamp": "2026-05-01T23:00:00.000Z", "graph_hash": ""}]
    quality = doc["quality"]
    assert (quality["checks_run"], quality["checks_failed"], quality["gate_failed_runs"]) == (2, 1, 1)
    assert quality["failures"] == [{"run_id": "run-raw", "table": "wh.raw.orders", "check": "not_null_id",
                                    "severity": "error"}]
    fresh = {p["pipeline"]: p for p in doc["freshness"]["pipelines"]}
    assert doc["freshness"]["availability"] == "available"
    assert fresh["models"] == {"stale": False, "pipeline": "models",
                               "last_success_at": "2026-05-02T02:02:00.000Z", "age_seconds": 3480}
    assert fresh["raw"] == {"stale": True, "pipeline": "raw", "budget_seconds": 3600}
    assert doc["freshness"]["stale"] == 1
    assert doc["scheduler"]["availability"] in ("no_data", "available")


def test_brief_markdown_is_slack_friendly(estate: Path) -> None:
    brief = build_brief(load_project(estate), since_spec="24h", now=NOW)
    md = brief.render_md()
    assert md.startswith(
        "*Rocky brief* · since 2026-05-01 03:00 UTC (24h) · generated 2026-05-02 03:00 UTC\n"
    )
    assert "*Runs* — 5 run(s): 2 succeeded, 2 partial, 1 failed\n" in md
    assert ("- PARTIAL `models` `run-partial` at 2026-05-01 17:00 UTC — failed: `wh.main.fct_orders`\n"
            "  > Binder Error: column x\n") in md
    assert "- FAILED `models` `run-fail` at 2026-05-01 22:00 UTC — failed: `good`\n" in md
    assert "*Drift* — 1 table(s) drifted\n- `wh.raw.orders`: add_column (new column note)\n" in md
    assert "*Freshness* — 1 of 1 pipeline(s) with a budget stale\n" in md
    assert "- `raw` never succeeded, budget 1h — STALE\n" in md
    assert "*Quality* — 2 check(s), 1 failed; 1 run(s) failed their check gate\n" in md
    assert "- `wh.raw.orders` not_null_id (error) in `run-raw`\n" in md
    assert "|" not in md and "#" not in md  # no tables, no headings: Slack shows neither


def test_the_window_moves_with_since(estate: Path) -> None:
    project = load_project(estate)
    week = build_brief(project, since_spec="7d", now=NOW)
    assert week.runs.total == 6 and week.quality.checks_run == 3
    hour = build_brief(project, since_spec="90m", now=NOW)
    assert hour.runs.total == 1 and hour.runs.failures == []
    empty = build_brief(project, since_spec="2026-05-02T02:59:00Z", now=NOW)
    assert empty.runs.availability == "no_data" and empty.quality.availability == "no_data"
    assert "*Runs* — no runs in this window" in empty.render_md()


def test_since_last_uses_and_advances_the_cursor_only_after_emit(estate: Path) -> None:
    project = load_project(estate)
    first = build_brief(project, since_spec="last", now=NOW)
    assert first.since == "2026-05-01T03:00:00.000Z"  # no cursor yet: the last 24 hours
    store_path = project.state_path()
    with StateStore.open(store_path, writer=False) as store:
        assert store.get_meta(CURSOR_KEY) is None  # building alone does not advance it
    first.after_emit()
    later = NOW + timedelta(hours=1)
    second = build_brief(project, since_spec="last", now=later)
    assert second.since == first.generated_at
    assert second.runs.availability == "no_data"
    # a 24h brief neither reads nor moves the cursor
    day = build_brief(project, since_spec="24h", now=later)
    day.after_emit()
    with StateStore.open(store_path, writer=False) as store:
        assert store.get_meta(CURSOR_KEY) == "2026-05-02T03:00:00.000000Z"


def test_an_unreadable_store_makes_every_section_unavailable(tmp_path: Path) -> None:
    config = make_project(tmp_path, seed=False)
    (tmp_path / "models" / ".rocky-state.db").write_text("garbage" * 500)
    brief = build_brief(load_project(config), since_spec="24h", now=NOW)
    assert brief.runs.availability == "unavailable"
    assert brief.scheduler.availability == "unavailable"
    assert "*Runs* — unavailable: state store at" in brief.render_md()


def test_parse_since_rejects_nonsense() -> None:
    with pytest.raises(UsageError, match="--since 'yesterday' is not understood"):
        parse_since("yesterday", now=NOW, cursor=None)
    assert parse_since("2026-05-01", now=NOW, cursor=None)[0] == datetime(2026, 5, 1, tzinfo=UTC)


def test_cli_brief_markdown_and_cursor(estate: Path) -> None:
    md = rocky(estate, "brief", "--since", "7d", "--output", "md", "--now", "2026-05-02T03:00:00Z")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("*Rocky brief* · since 2026-04-25 03:00 UTC (7d)")
    last = rocky(estate, "brief", "--since", "last", "--output", "json", "--now", "2026-05-02T03:00:00Z")
    assert last.returncode == 0, last.stderr
    assert json.loads(last.stdout)["window"] == "last"
    with StateStore.open(estate.parent / "models" / ".rocky-state.db", writer=False) as store:
        assert store.get_meta(CURSOR_KEY) == "2026-05-02T03:00:00.000000Z"
    bad = rocky(estate, "brief", "--since", "soon")
    assert bad.returncode == 1 and bad.stderr.startswith("error: --since 'soon' is not understood")



def test_a_window_without_drift_validates_against_the_published_brief(tmp_path: Path) -> None:
    """``drift.events`` is required by the published ``BriefOutput``: runs without drift write ``[]``."""
    config = make_project(tmp_path, seed=False)
    with StateStore.open(tmp_path / "models" / ".rocky-state.db") as store:
        store.runs.insert_many([_run("run-ok", "models", "Success", 2, models=[("good", "success")])])
    doc = build_brief(load_project(config), since_spec="24h", now=NOW).wire()
    brief_schema.BriefOutput.model_validate(doc)
    assert doc["drift"] == {"availability": "available", "tables_drifted": 0, "events": []}
    assert doc["runs"]["total"] == 1


def test_a_window_without_runs_validates_against_the_published_brief(estate: Path) -> None:
    project = load_project(estate)
    build_brief(project, since_spec="last", now=NOW).after_emit()
    doc = build_brief(project, since_spec="last", now=NOW + timedelta(hours=1)).wire()
    brief_schema.BriefOutput.model_validate(doc)
    assert doc["drift"] == {"availability": "no_data", "tables_drifted": 0, "events": []}
    assert doc["runs"]["availability"] == "no_data"


def test_an_unavailable_drift_section_validates_against_the_published_one(tmp_path: Path) -> None:
    """(The whole unavailable brief does not: the published scheduler section requires its counts even
    when it could not read them, which this engine does not invent.)"""
    config = make_project(tmp_path, seed=False)
    (tmp_path / "models" / ".rocky-state.db").write_text("garbage" * 500)
    doc = build_brief(load_project(config), since_spec="24h", now=NOW).wire()
    brief_schema.BriefDriftSection.model_validate(doc["drift"])
    assert doc["drift"]["events"] == [] and doc["drift"]["availability"] == "unavailable"
