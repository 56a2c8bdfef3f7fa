"""A transformation pipeline's ``[checks]`` run after the DAG on the models built as tables: results,
check history, anomalies, the check gate (exit 2, like replication), and the check lifecycle events."""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING

from rocky_engine.state.store import StateStore
from tests.fixtures.projects import TRANSFORMATION_TOML

if TYPE_CHECKING:
    from conftest import WarehouseProject


def with_checks(wp: WarehouseProject, checks: str, extra: str = "") -> None:
    wp.write_config(
        TRANSFORMATION_TOML.format(pipeline="models") + extra
        + "\n[pipeline.models.checks]\n" + textwrap.dedent(checks)
    )


def shop(wp: WarehouseProject) -> None:
    """base (table) -> eph (ephemeral) -> fct (table); vw (view) over base."""
    wp.model("base", "SELECT range AS id, CASE WHEN range = 3 THEN NULL ELSE range END AS v FROM range(5)")
    wp.model("eph", "SELECT id, v FROM base", toml='[strategy]\ntype = "ephemeral"\n')
    wp.model("fct", "SELECT id, v FROM eph")
    wp.model("vw", "SELECT id FROM base", toml='[strategy]\ntype = "view"\n')


NOT_NULL_FCT = """
[[pipeline.models.checks.assertions]]
table = "fct"
type = "not_null"
column = "v"
severity = "{severity}"
"""


def history(wp: WarehouseProject, run_id: str) -> list[tuple[str, str, bool, object]]:
    with StateStore.open(wp.state_path, writer=False) as store:
        return sorted((r.table_key, r.check_name, r.passed, r.value) for r in store.checks.for_run(run_id))


def test_no_checks_configured_runs_no_checks(wp: WarehouseProject) -> None:
    shop(wp)
    out = wp.run()
    assert out.status == "Success" and out.check_results == [] and out.check_gate_failed is False
    assert history(wp, out.run_id or "") == []


def test_checks_run_on_built_tables_only_in_dag_order(wp: WarehouseProject) -> None:
    shop(wp)
    with_checks(wp, "row_count = true\n")
    out = wp.run()
    assert out.status == "Success" and out.check_gate_failed is False
    # The view holds no data of its own and the ephemeral model is never materialized.
    five = [{"name": "row_count", "passed": True, "severity": "error", "target_count": 5}]
    assert [(r.asset_key, r.wire()["checks"]) for r in out.check_results] == [
        (["wh", "main", "base"], five),
        (["wh", "main", "fct"], five),
    ]
    assert history(wp, out.run_id or "") == [
        ("wh.main.base", "row_count", True, 5),
        ("wh.main.fct", "row_count", True, 5),
    ]


def test_failed_error_check_makes_the_run_partial_exit_2(wp: WarehouseProject) -> None:
    shop(wp)
    with_checks(wp, NOT_NULL_FCT.format(severity="error"))
    res = wp.cli("run", "--output", "json")
    assert res.returncode == 2, res.stderr
    doc = res.json
    assert doc["status"] == "PartialFailure" and doc["check_gate_failed"] is True
    assert doc["tables_copied"] == 3 and doc["tables_failed"] == 0 and "errors" not in doc
    # Only fct is named by the assertion: base has no applicable check and reports nothing.
    assert doc["check_results"] == [{
        "asset_key": ["wh", "main", "fct"],
        "checks": [{"name": "not_null:v", "passed": False, "severity": "error", "kind": "not_null",
                    "column": "v", "failing_rows": 1}],
    }]
    logs = [json.loads(line) for line in res.stderr.splitlines()]
    assert {"level": "error", "message": "check gate: an error-severity check failed on 1 built model(s): "
            "wh.main.fct"}.items() <= next(x for x in logs if "check gate" in x["message"]).items()
    [record] = wp.runs()
    assert record.status == "PartialFailure" and record.exit_code == 2
    assert wp.relation_kind("main", "fct") == "BASE TABLE"  # the data has landed


def test_warning_failure_is_advisory(wp: WarehouseProject) -> None:
    shop(wp)
    with_checks(wp, NOT_NULL_FCT.format(severity="warning"))
    res = wp.cli("run", "--output", "table")
    assert res.returncode == 0, res.stderr
    assert "warning: check not_null:v failed on model fct (wh.main.fct)\n" in res.stderr
    out = wp.run()
    assert out.status == "Success" and out.check_gate_failed is False
    assert out.check_results[0].checks[0].passed is False


def test_fail_on_error_false_keeps_the_run_successful(wp: WarehouseProject) -> None:
    shop(wp)
    with_checks(wp, "fail_on_error = false\n" + NOT_NULL_FCT.format(severity="error"))
    out = wp.run()
    assert out.status == "Success" and out.exit_code() == 0 and out.check_gate_failed is False
    assert out.check_results[0].checks[0].passed is False


def test_disabled_checks_do_not_run(wp: WarehouseProject) -> None:
    shop(wp)
    with_checks(wp, "enabled = false\nrow_count = true\n" + NOT_NULL_FCT.format(severity="error"))
    out = wp.run()
    assert out.status == "Success" and out.check_results == []


def test_failed_model_is_not_checked_and_model_flag_limits_checks(wp: WarehouseProject) -> None:
    shop(wp)
    wp.model("broken", "SELECT nope FROM base")
    with_checks(wp, "row_count = true\n")
    out = wp.run()
    assert out.status == "PartialFailure" and out.check_gate_failed is False
    assert [r.asset_key[-1] for r in out.check_results] == ["base", "fct"]
    only = wp.run(models=("fct",))
    assert [r.asset_key[-1] for r in only.check_results] == ["fct"]


def test_freshness_reads_the_incremental_timestamp_column(wp: WarehouseProject) -> None:
    wp.model(
        "events", "SELECT 1 AS id, TIMESTAMP '2020-01-01' AS ts",
        toml='[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\n',
    )
    wp.model("plain", "SELECT 1 AS id")
    with_checks(wp, 'freshness = { threshold_seconds = 60, severity = "error" }\n')
    out = wp.run()
    [result] = out.check_results
    assert result.asset_key == ["wh", "main", "events"]
    [fresh] = result.wire()["checks"]
    assert fresh["name"] == "freshness" and fresh["passed"] is False and fresh["lag_seconds"] > 60
    assert out.status == "PartialFailure" and out.check_gate_failed is True


def test_freshness_without_any_timestamp_column_warns(wp: WarehouseProject) -> None:
    wp.model("plain", "SELECT 1 AS id")
    with_checks(wp, "freshness = { threshold_seconds = 60 }\n")
    res = wp.cli("run", "--output", "table")
    assert res.returncode == 0, res.stderr
    assert ("warning: freshness is configured but no built model names a timestamp_column in its "
            "[strategy]; freshness skipped\n") in res.stderr


def test_row_count_anomaly_is_advisory(wp: WarehouseProject) -> None:
    wp.model("fct", "SELECT range AS id FROM range(CAST('{{ var(\"n\") }}' AS INTEGER))")
    with_checks(wp, "row_count = true\nanomaly_threshold_pct = 30\n")
    for _ in range(3):
        assert wp.run(variables={"n": "10"}).anomalies == []
    out = wp.run(variables={"n": "2"})
    assert out.status == "Success"
    [anomaly] = out.anomalies
    assert (anomaly.table, anomaly.current_count, anomaly.baseline_avg) == ("wh.main.fct", 2, 10.0)


def test_check_events_fire(wp: WarehouseProject) -> None:
    shop(wp)
    hooks = "".join(
        f'\n[[hook.on_{event}]]\ncommand = "cat >> events.jsonl; echo >> events.jsonl"\n'
        for event in ("before_checks", "check_result", "after_checks")
    )
    with_checks(wp, NOT_NULL_FCT.format(severity="error"), extra=hooks)
    out = wp.run()
    assert out.status == "PartialFailure"
    lines = (wp.root / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line]
    assert [e["event"] for e in events] == ["before_checks", "check_result", "after_checks"]
    before, result, after = events
    assert before["metadata"] == {"tables": 2}
    assert result["model"] == "fct" and result["table"] == "wh.main.fct"
    assert result["metadata"]["passed"] is False and result["metadata"]["asset_key"] == ["wh", "main", "fct"]
    assert after["metadata"] == {"tables": 1, "failed": 1}


def test_before_checks_abort_skips_the_checks_but_keeps_the_models(wp: WarehouseProject) -> None:
    shop(wp)
    hook = '\n[[hook.on_before_checks]]\ncommand = "exit 3"\non_failure = "abort"\n'
    with_checks(wp, "row_count = true\n", extra=hook)
    out = wp.run()
    assert out.status == "PartialFailure" and out.check_results == []
    assert out.tables_copied == 3
    [error] = out.errors
    assert error.asset_key == [] and error.error.startswith("checks not run: aborted by")
    assert wp.relation_kind("main", "fct") == "BASE TABLE"
