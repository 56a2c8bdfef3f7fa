"""The ``rocky run`` JSON document, table output, and the run record a transformation run leaves."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine import __version__

if TYPE_CHECKING:
    from conftest import WarehouseProject

REQUIRED = {
    "version", "command", "status", "filter", "duration_ms", "tables_copied", "tables_failed",
    "materializations", "check_results", "execution", "metrics", "permissions", "drift", "interrupted",
    "check_gate_failed",
}
RUN_ID = re.compile(r"^run-\d{8}-\d{6}-\d{3}$")
PLAYGROUND = Path(__file__).resolve().parents[3] / "examples" / "playground"


def small_project(wp: WarehouseProject) -> dict[str, Path]:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.events AS SELECT range AS id, TIMESTAMP '2026-03-01' + INTERVAL (range) DAY AS ts "
        "FROM range(4)",
    )
    return {
        "events": wp.model(
            "events", "SELECT id, ts FROM raw.events",
            '[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\n', subdir="staging",
        ),
        "daily": wp.model("daily", "SELECT CAST(ts AS DATE) AS d, count(*) AS n FROM events GROUP BY 1"),
        "latest": wp.model("latest", "SELECT max(ts) AS ts FROM events", '[strategy]\ntype = "view"\n'),
    }


def test_run_json_document_shape(wp: WarehouseProject) -> None:
    files = small_project(wp)
    (wp.root / "models" / "staging" / "_defaults.toml").write_text('[target]\nschema = "staging"\n')
    res = wp.cli("run", "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = res.json
    assert res.stdout == json.dumps(doc, indent=2) + "\n"
    assert set(doc) == REQUIRED | {"pipeline_type", "run_id"}  # empty optionals are omitted
    assert doc["version"] == __version__
    assert doc["command"] == "run"
    assert doc["status"] == "Success"
    assert doc["filter"] == ""
    assert doc["pipeline_type"] == "transformation"
    assert RUN_ID.match(doc["run_id"])
    assert type(doc["duration_ms"]) is int and doc["duration_ms"] >= 0
    assert (doc["tables_copied"], doc["tables_failed"]) == (3, 0)
    assert doc["check_results"] == []
    assert doc["metrics"] is None
    assert doc["interrupted"] is False
    assert doc["execution"] == {"concurrency": 3, "tables_processed": 3, "tables_failed": 0}
    assert doc["permissions"] == {
        "grants_added": 0, "grants_revoked": 0, "catalogs_created": 0, "schemas_created": 1,
    }
    assert doc["drift"] == {"tables_checked": 0, "tables_drifted": 0, "actions_taken": []}

    mats = {m["asset_key"][-1]: m for m in doc["materializations"]}
    assert doc["materializations"][0]["asset_key"][-1] == "events"
    assert mats["events"]["asset_key"] == ["wh", "staging", "events"]
    assert mats["daily"]["asset_key"] == ["wh", "main", "daily"]
    for name, mat in mats.items():
        assert set(mat) == {"asset_key", "duration_ms", "rows_copied", "started_at", "metadata"} - (
            {"rows_copied"} if name == "latest" else set()
        )
        assert type(mat["duration_ms"]) is int
        started = datetime.fromisoformat(mat["started_at"].replace("Z", "+00:00"))
        assert mat["started_at"].endswith("Z") and started.tzinfo is not None
        assert abs((datetime.now(UTC) - started).total_seconds()) < 120
        expected_hash = hashlib.sha256(files[name].read_text().encode()).hexdigest()[:16]
        assert mat["metadata"]["sql_hash"] == expected_hash
        assert mat["metadata"]["target_table_full_name"] == ".".join(mat["asset_key"])
    assert mats["events"]["metadata"] == {
        "strategy": "incremental",
        "watermark": "2026-03-04T00:00:00Z",
        "target_table_full_name": "wh.staging.events",
        "sql_hash": mats["events"]["metadata"]["sql_hash"],
    }
    assert set(mats["daily"]["metadata"]) == {"strategy", "target_table_full_name", "sql_hash"}
    assert mats["daily"]["rows_copied"] == 4
    assert mats["latest"]["metadata"]["strategy"] == "view"


def test_json_is_the_default_when_stdout_is_piped(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS x")
    res = wp.cli("run")
    assert res.returncode == 0
    assert res.json["status"] == "Success"


def test_table_output_is_readable(wp: WarehouseProject) -> None:
    wp.sql("CREATE SCHEMA raw", "CREATE TABLE raw.vals AS SELECT 'x' AS code")
    wp.model("ok_model", "SELECT 1 AS x")
    wp.model("bad", "SELECT CAST(code AS INTEGER) AS n FROM raw.vals")
    wp.model("after_bad", "SELECT * FROM bad")
    res = wp.cli("run", "--output", "table")
    assert res.returncode == 2
    lines = res.stdout.splitlines()
    assert re.match(
        r"^run run-\d{8}-\d{6}-\d{3}  status=PartialFailure  duration=\d+\.\d\ds  materialized=1  failed=1$",
        lines[0],
    )
    assert lines[1].split() == ["table", "strategy", "rows", "ms"]
    assert lines[3].split()[:3] == ["wh.main.ok_model", "full_refresh", "1"]
    assert "errors" in lines
    error_row = next(line for line in lines if line.startswith("wh.main.bad "))
    assert "Conversion Error" in error_row
    assert "withheld (upstream failed)" in lines
    assert any(line.split() == ["after_bad", "bad"] for line in lines)
    assert not res.stdout.lstrip().startswith("{")


def test_run_record_and_history(wp: WarehouseProject) -> None:
    small_project(wp)
    res = wp.cli("run", "--output", "json", "--parallel", "2")
    assert res.returncode == 0, res.stderr
    run_id = res.json["run_id"]
    history = wp.cli("history", "--output", "json")
    assert history.returncode == 0, history.stderr
    [entry] = history.json["runs"]
    assert entry["run_id"] == run_id
    assert entry["status"] == "Success"
    assert entry["models_executed"] == 3
    assert entry["trigger"] == "Manual"
    assert entry["pipeline"] == "models"
    assert "submission_id" not in entry

    [record] = wp.runs()
    assert record.run_id == run_id
    assert record.pipeline == "models" and record.pipeline_type == "transformation"
    assert record.status == "Success" and record.exit_code == 0 and record.interrupted is False
    assert record.trigger == "Manual" and record.submission_id is None
    assert record.finished_at is not None and record.started_at <= record.finished_at
    assert record.config_hash and record.hostname
    assert sorted(e.model_name for e in record.models_executed) == ["daily", "events", "latest"]
    rows = {e.model_name: e.rows_affected for e in record.models_executed}
    assert rows == {"events": 4, "daily": 4, "latest": None}
    assert all(e.status == "success" and e.duration_ms >= 0 for e in record.models_executed)


def test_trigger_and_submission_id_from_environment(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS x")
    res = wp.cli(
        "run", "--output", "json", env={"ROCKY_RUN_TRIGGER": "schedule", "ROCKY_SUBMISSION_ID": "abc"}
    )
    assert res.returncode == 0, res.stderr
    [record] = wp.runs()
    assert record.trigger == "Schedule"
    assert record.submission_id == "abc"
    history = wp.cli("history", "--output", "json").json["runs"]
    assert (history[0]["trigger"], history[0]["submission_id"]) == ("Schedule", "abc")


def test_each_run_gets_its_own_record(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS x")
    ids = [wp.run().run_id for _ in range(3)]
    assert len(set(ids)) == 3
    assert [r.run_id for r in wp.runs()] == ids[::-1]  # newest first


def test_playground_runs_out_of_the_box(tmp_path: Path, rocky_cmd: list[str]) -> None:
    root = tmp_path / "playground"
    shutil.copytree(
        PLAYGROUND, root, ignore=shutil.ignore_patterns("*.duckdb", "*.duckdb.wal", ".rocky-state*", ".rocky")
    )
    subprocess.run([sys.executable, "seed.py"], cwd=root, check=True, capture_output=True)
    # as `make demo` does: replicate raw__* into staging__*, then build the models on top
    raw = subprocess.run([*rocky_cmd, "-c", "rocky.toml", "run", "--pipeline", "raw", "--output", "json"],
                         cwd=root, capture_output=True, text=True)
    assert raw.returncode == 0, raw.stderr
    cmd = [*rocky_cmd, "-c", "rocky.toml", "run", "--pipeline", "models"]
    first = subprocess.run([*cmd, "--output", "json"], cwd=root, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["status"] == "Success"
    assert doc["tables_copied"] == 9
    keys = {tuple(m["asset_key"]) for m in doc["materializations"]}
    assert ("playground", "marts", "fct_daily_revenue") in keys
    assert ("playground", "staging", "stg_orders") in keys
    second = json.loads(subprocess.run([*cmd, "--output", "json"], cwd=root, capture_output=True,
                                       text=True, check=True).stdout)
    stg_orders = next(m for m in second["materializations"] if m["asset_key"][-1] == "stg_orders")
    assert stg_orders["rows_copied"] == 0  # incremental: nothing new since the first run
    # and, last in `make demo`, the quality checks on the marts pass
    quality = subprocess.run(
        [*rocky_cmd, "-c", "rocky.toml", "run", "--pipeline", "quality", "--output", "json"],
        cwd=root, capture_output=True, text=True,
    )
    assert quality.returncode == 0, quality.stderr
    qdoc = json.loads(quality.stdout)
    assert qdoc["status"] == "Success" and qdoc["check_gate_failed"] is False
    names = {c["name"] for r in qdoc["check_results"] for c in r["checks"]}
    assert names >= {"not_null:order_id", "unique:order_id"}
