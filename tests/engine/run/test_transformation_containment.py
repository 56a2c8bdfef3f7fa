"""Per-model containment, run status and exit codes, compile errors, --var, --model, concurrency."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rocky_sdk.types_generated import brief_schema, history_schema

from rocky_engine.errors import UsageError
from tests.engine.schedule.kit import write_project
from tests.fixtures.inprocess import rocky_in_process

if TYPE_CHECKING:
    from conftest import WarehouseProject

CONTRACT_KINDS = {
    "connection-failed", "auth-failed", "query-rejected", "transient", "quota-exceeded", "not-found",
    "compile-error", "unknown",
}


def source(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.vals AS SELECT * FROM (VALUES ('1'), ('2'), ('abc')) v(code)",
    )


def test_failures_withhold_downstream_while_other_branches_run(wp: WarehouseProject) -> None:
    source(wp)
    wp.model("bad_cast", "SELECT CAST(code AS INTEGER) AS n FROM raw.vals")  # fails at run time
    wp.model("bad_child", "SELECT * FROM bad_cast")
    wp.model("bad_grandchild", "SELECT * FROM bad_child, good")
    wp.model("missing_col", "SELECT no_such_column FROM raw.vals")
    wp.model("both_blocked", "SELECT * FROM missing_col JOIN bad_child ON true")
    wp.model("good", "SELECT CAST(code AS INTEGER) AS n FROM raw.vals WHERE code <> 'abc'")
    wp.model("good_child", "SELECT sum(n) AS total FROM good")
    res = wp.cli("run", "--output", "json")
    assert res.returncode == 2, res.stderr
    doc = res.json
    assert doc["status"] == "PartialFailure"
    assert sorted(m["asset_key"][-1] for m in doc["materializations"]) == ["good", "good_child"]
    assert wp.query("SELECT total FROM wh.main.good_child") == [(3,)]
    for absent in ("bad_cast", "bad_child", "bad_grandchild", "missing_col", "both_blocked"):
        assert wp.relation_kind("main", absent) is None
    errors = {tuple(e["asset_key"]): e for e in doc["errors"]}
    assert set(errors) == {("wh", "main", "bad_cast"), ("wh", "main", "missing_col")}
    cast_error = errors[("wh", "main", "bad_cast")]
    assert cast_error["error"].startswith("Conversion Error: Could not convert string 'abc' to INT32")
    assert "\n" not in cast_error["error"]
    assert cast_error["failure_kind"] in CONTRACT_KINDS - {"compile-error"}
    missing = errors[("wh", "main", "missing_col")]
    assert 'Referenced column "no_such_column" not found' in missing["error"]
    assert missing["failure_kind"] in CONTRACT_KINDS - {"compile-error"}
    assert doc["contained"] == [
        {
            "model": "bad_child",
            "blocked_by": ["bad_cast"],
            "unblock_hint": "fix bad_cast and run again"
            " (or `rocky run --pipeline models --model bad_child` once the upstream is rebuilt)",
        },
        {
            "model": "bad_grandchild",
            "blocked_by": ["bad_cast"],
            "unblock_hint": "fix bad_cast and run again"
            " (or `rocky run --pipeline models --model bad_grandchild` once the upstream is rebuilt)",
        },
        {
            "model": "both_blocked",
            "blocked_by": ["bad_cast", "missing_col"],
            "unblock_hint": "fix bad_cast, missing_col and run again"
            " (or `rocky run --pipeline models --model both_blocked` once the upstream is rebuilt)",
        },
    ]
    assert (doc["tables_copied"], doc["tables_failed"]) == (2, 2)
    assert doc["execution"] == {"concurrency": 4, "tables_processed": 4, "tables_failed": 2}
    assert "model bad_cast failed" in res.stderr
    assert "Traceback" not in res.stderr
    [record] = wp.runs()
    assert record.status == "PartialFailure" and record.exit_code == 2
    statuses = {e.model_name: e.status for e in record.models_executed}
    assert statuses == {
        "good": "success", "good_child": "success", "bad_cast": "failed", "missing_col": "failed",
        # withheld behind a failed upstream: the record names them as the document's contained[] does
        "bad_child": "contained", "bad_grandchild": "contained", "both_blocked": "contained",
    }


def test_every_model_failing_is_failure_exit_1_with_json(wp: WarehouseProject) -> None:
    source(wp)
    wp.model("bad_cast", "SELECT CAST(code AS INTEGER) AS n FROM raw.vals")
    wp.model("child", "SELECT * FROM bad_cast")
    res = wp.cli("run", "--output", "json")
    assert res.returncode == 1
    doc = res.json  # the result is printed before a non-zero exit
    assert doc["status"] == "Failure"
    assert doc["materializations"] == []
    assert [c["model"] for c in doc["contained"]] == ["child"]
    assert wp.runs()[0].status == "Failure"


def test_unset_var_is_a_compile_error_and_contains_dependents(wp: WarehouseProject) -> None:
    wp.model("needs_var", "SELECT {{ var('x') }} AS v")
    wp.model("child", "SELECT * FROM needs_var")
    wp.model("fine", "SELECT 1 AS v")
    out = wp.run()
    assert out.status == "PartialFailure"
    [error] = out.errors
    assert error.asset_key == ["wh", "main", "needs_var"]
    assert error.failure_kind == "compile-error"
    assert error.error == (
        "model 'needs_var' uses variable 'x' but no value was given; "
        "pass --var x=<value> or write {{ var('x', '<default>') }}"
    )
    assert [c.model for c in out.contained] == ["child"]


def test_sql_syntax_error_is_a_compile_error(wp: WarehouseProject) -> None:
    wp.model("typo", "SELEC 1")
    out = wp.run()
    assert out.status == "Failure"
    assert out.errors[0].failure_kind == "compile-error"
    assert out.errors[0].error.startswith("Parser Error: syntax error at or near")


def test_var_flags_render_into_sql(wp: WarehouseProject) -> None:
    wp.model("v", "SELECT {{ var('n') }} AS n, '{{ var('label', 'none') }}' AS label, '{{var('eq')}}' AS eq")
    res = wp.cli("run", "--var", "n=41", "--var", "n=42", "--var", "eq=a=b", "--output", "json")
    assert res.returncode == 0, res.stderr
    assert wp.query("SELECT n, label, eq FROM wh.main.v") == [(42, "none", "a=b")]


def test_malformed_var_flag(wp: WarehouseProject) -> None:
    wp.model("v", "SELECT 1")
    res = wp.cli("run", "--var", "novalue")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == "error: --var 'novalue' is not NAME=VALUE; write --var start_date=2026-01-01\n"


def test_model_flag_runs_only_that_model(wp: WarehouseProject) -> None:
    wp.model("stg_orders", "SELECT 1 AS id")
    wp.model("fct_orders", "SELECT * FROM stg_orders")
    assert wp.run().tables_copied == 2
    wp.model("stg_orders", "SELECT 2 AS id")
    out = wp.run(models=("fct_orders",))
    assert [m.asset_key[-1] for m in out.materializations] == ["fct_orders"]
    assert wp.query("SELECT id FROM wh.main.stg_orders") == [(1,)]  # upstream not rebuilt
    assert wp.query("SELECT id FROM wh.main.fct_orders") == [(1,)]


def test_model_flag_unknown_model_suggests(wp: WarehouseProject) -> None:
    wp.model("stg_orders", "SELECT 1 AS id")
    res = wp.cli("run", "--model", "stg_order")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == (
        "error: --model 'stg_order' is not a model of pipeline 'models'; did you mean 'stg_orders'?\n"
    )
    assert wp.runs() == []


def test_model_flag_unknown_model_without_close_match(wp: WarehouseProject) -> None:
    wp.model("stg_orders", "SELECT 1 AS id")
    with pytest.raises(UsageError) as info:
        wp.run(models=("zzz",))
    assert str(info.value) == (
        "--model 'zzz' is not a model of pipeline 'models'; run `rocky validate` to list the models"
    )


# ---------------------------------------------------------------------- concurrency


def diamond_project(wp: WarehouseProject) -> None:
    wp.sql(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.orders AS SELECT range AS id, range % 17 AS cust, (range * 7) % 100 AS amount "
        "FROM range(2000)",
    )
    wp.model("stg", "SELECT * FROM raw.orders")
    for i in range(8):
        wp.model(f"part_{i}", f"SELECT cust, sum(amount) AS s FROM stg WHERE cust % 8 = {i} GROUP BY cust")
    union = " UNION ALL ".join(f"SELECT * FROM part_{i}" for i in range(8))
    wp.model("all_parts", union)
    wp.model("ranked", "SELECT cust, s, rank() OVER (ORDER BY s DESC, cust) AS r FROM all_parts")
    wp.model("total", "SELECT sum(s) AS t FROM all_parts JOIN ranked USING (cust, s)")


def snapshot(wp: WarehouseProject) -> dict[str, list[tuple[Any, ...]]]:
    rows = wp.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'")
    names = [r[0] for r in rows]
    return {name: wp.query(f"SELECT * FROM wh.main.{name} ORDER BY ALL") for name in sorted(names)}


def test_parallel_one_and_four_build_identical_tables(tmp_path: Path, wp: WarehouseProject) -> None:
    other = type(wp)(tmp_path / "second")
    other.root.mkdir()
    other.config.write_text(wp.config.read_text())
    (other.root / "models").mkdir()
    diamond_project(wp)
    diamond_project(other)
    serial = wp.run(parallel=1)
    parallel = other.run(parallel=4)
    assert serial.status == parallel.status == "Success"
    assert serial.execution.concurrency == 1 and parallel.execution.concurrency == 4
    assert serial.tables_copied == parallel.tables_copied == 12
    # serial execution follows the deterministic topological order exactly
    assert [m.asset_key[-1] for m in serial.materializations] == [
        "stg", *(f"part_{i}" for i in range(8)), "all_parts", "ranked", "total",
    ]
    first, second = snapshot(wp), snapshot(other)
    assert len(first) == 12
    assert first == second
    assert first["total"] == [(sum((i * 7) % 100 for i in range(2000)),)]


def test_concurrency_comes_from_execution_config_unless_parallel_is_given(wp: WarehouseProject) -> None:
    wp.config.write_text(wp.config.read_text() + "\n[pipeline.models.execution]\nconcurrency = 2\n")
    for name in ("a", "b", "c"):
        wp.model(name, "SELECT 1 AS x")
    assert wp.run().execution.concurrency == 2
    assert wp.run(parallel=3).execution.concurrency == 3
    assert wp.run(parallel=16).execution.concurrency == 3  # never more sessions than models


def test_parallel_zero_is_refused(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1")
    res = wp.cli("run", "--parallel", "0")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == "error: --parallel must be at least 1\n"
    assert not wp.state_path.exists() or wp.runs() == []


def test_several_pipelines_need_the_pipeline_flag(wp: WarehouseProject) -> None:
    wp.config.write_text(wp.config.read_text() + '\n[pipeline.other]\ntype = "transformation"\n')
    wp.model("a", "SELECT 1 AS x")
    res = wp.cli("run")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == (
        "error: this project has several pipelines (models, other); choose one with --pipeline NAME\n"
    )
    ok = wp.cli("run", "--pipeline", "other", "--output", "json")
    assert ok.returncode == 0, ok.stderr
    assert wp.runs()[0].pipeline == "other"


def test_the_unblock_hint_runs_as_pasted_in_a_project_of_several_pipelines(tmp_path: Path) -> None:
    """``rocky run --model M`` alone is refused when the project has several pipelines: the hint's command
    names the pipeline, and it runs (here: the withheld model over its upstream's earlier build)."""
    body = "".join(
        f'\n[pipeline.{name}]\ntype = "transformation"\nmodels = "models/{name}/**"\n' for name in ("a", "b")
    )
    config = write_project(tmp_path, body, {
        "a/upstream.sql": "SELECT 1 AS n", "a/child.sql": "SELECT n + 1 AS n FROM upstream",
        "b/other.sql": "SELECT 2 AS n",
    })

    def rocky(*args: str) -> tuple[int, str, str]:
        res = rocky_in_process(["-c", str(config), *args, "--output", "json"])
        return res.returncode, res.stdout, res.stderr

    assert rocky("run", "--pipeline", "a")[0] == 0
    (tmp_path / "models" / "a" / "upstream.sql").write_text("SELECT CAST('abc' AS INTEGER) AS n")
    code, out, err = rocky("run", "--pipeline", "a")
    assert code == 1, err
    [contained] = json.loads(out)["contained"]
    hint = re.search(r"`(rocky [^`]+)`", contained["unblock_hint"])
    assert hint is not None, contained
    command = shlex.split(hint.group(1))
    code, out, err = rocky(*command[1:])
    assert code in (0, 2), (command, err)  # not a usage error
    assert command == ["rocky", "run", "--pipeline", "a", "--model", "child"]
    assert [m["asset_key"][-1] for m in json.loads(out)["materializations"]] == ["child"]


def test_the_record_history_and_brief_name_the_models_left_unbuilt(wp: WarehouseProject) -> None:
    source(wp)
    wp.model("bad_cast", "SELECT CAST(code AS INTEGER) AS n FROM raw.vals")
    wp.model("bad_child", "SELECT * FROM bad_cast")
    wp.model("good", "SELECT 1 AS n")
    out = wp.run()
    assert (out.status, [c.model for c in out.contained]) == ("PartialFailure", ["bad_child"])
    [record] = wp.runs()
    assert sorted((m.model_name, m.status) for m in record.models_executed) == [
        ("bad_cast", "failed"), ("bad_child", "contained"), ("good", "success")
    ]
    history = rocky_in_process(["-c", str(wp.config), "history", "--output", "json"])
    [run] = json.loads(history.stdout)["runs"]
    history_schema.RunHistoryRecord.model_validate(run)
    assert run["models_executed"] == 2  # what ran; the contained model is listed, not counted
    assert {m["model_name"]: m["status"] for m in run["models"]}["bad_child"] == "contained"
    brief = json.loads(rocky_in_process(["-c", str(wp.config), "brief", "--output", "json"]).stdout)
    brief_schema.BriefOutput.model_validate(brief)
    [attention] = brief["runs"]["attention"]
    assert attention["failed_models"] == [
        {"model_name": "bad_cast", "status": "failed"}, {"model_name": "bad_child", "status": "contained"}
    ]
