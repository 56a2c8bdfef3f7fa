"""``rocky ci``: zero-row builds in a scratch DuckDB, assertions, exit codes, and no warehouse writes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb

from rocky_engine.ops.ci import CiResult, run_ci
from tests.engine.hooks.kit import GOOD_SQL, make_project, rocky

MODELS = {
    "stg_orders": "SELECT id, amount FROM raw.orders",
    "fct_orders": "SELECT id, amount * 2 AS doubled FROM stg_orders",
}
ASSERTIONS = """
[[pipeline.models.checks.assertions]]
table = "fct_orders"
type = "not_null"
column = "id"

[[pipeline.models.checks.assertions]]
table = "fct_orders"
type = "row_count_range"
min = 1

[[pipeline.models.checks.assertions]]
table = "somewhere_else"
type = "unique"
column = "id"
"""


def _codes(result: CiResult) -> list[tuple[str, str, str]]:
    return [(d.severity, d.code, d.model) for d in result.diagnostics]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tables(path: Path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {f"{r[0]}.{r[1]}" for r in con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables").fetchall()}
    finally:
        con.close()


def test_a_clean_project_builds_every_model_without_touching_the_warehouse(tmp_path: Path) -> None:
    config = make_project(tmp_path, MODELS, extra_toml=ASSERTIONS)
    warehouse = tmp_path / "wh.duckdb"
    before = _digest(warehouse)
    result = run_ci(config)
    assert result.ci_exit_code == 0 and result.exit_code() == 0
    assert (result.models_compiled, result.models_built) == (2, 2)
    assert (result.tests_passed, result.tests_failed, result.tests_skipped) == (1, 0, 2)
    assert result.compile_ok and result.tests_ok
    assert _codes(result) == [("Info", "C007", "fct_orders"), ("Info", "C007", "")]
    assert result.diagnostics[0].message == "assertion row_count_range needs data; its SQL was checked"
    assert _digest(warehouse) == before
    assert _tables(warehouse) == {"raw.orders"}


def test_a_broken_column_is_an_error(tmp_path: Path) -> None:
    config = make_project(tmp_path, {**MODELS, "bad": "SELECT nope FROM stg_orders"})
    result = run_ci(config)
    assert result.ci_exit_code == 1 and result.exit_code() == 1
    assert ("Error", "C003", "bad") in _codes(result)
    bad = next(d for d in result.diagnostics if d.model == "bad")
    assert bad.message.startswith('does not build: Binder Error: Referenced column "nope" not found')


def test_a_missing_source_table_is_an_error_when_the_warehouse_is_there(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"typo": "SELECT * FROM raw.ordrs"})
    result = run_ci(config)
    assert result.ci_exit_code == 1
    assert result.diagnostics[0].message.endswith("(neither the warehouse nor a model has it)")


def test_an_assertion_on_a_missing_column_is_an_error(tmp_path: Path) -> None:
    config = make_project(tmp_path, MODELS, extra_toml="""
        [[pipeline.models.checks.assertions]]
        table = "fct_orders"
        type = "accepted_values"
        column = "status"
        values = ["paid"]
        """)
    result = run_ci(config)
    assert result.ci_exit_code == 1 and not result.tests_ok
    assert _codes(result) == [("Error", "C006", "fct_orders")]
    assert result.diagnostics[0].message.startswith(
        "assertion accepted_values:status does not run: Binder Error"
    )
    # the failed test, as the published client lists it
    [failure] = result.failures
    assert failure.name == "accepted_values:status on fct_orders" and failure.error.startswith("Binder Error")


def test_without_a_warehouse_sources_are_advisory(tmp_path: Path) -> None:
    config = make_project(tmp_path, MODELS, seed=False)
    result = run_ci(config)
    assert result.ci_exit_code == 4 and result.exit_code() == 0
    assert _codes(result) == [
        ("Warning", "C008", ""), ("Warning", "C004", "stg_orders"), ("Warning", "C005", "fct_orders"),
    ]
    assert result.diagnostics[2].message == "not built: upstream not built: stg_orders"
    assert not (tmp_path / "wh.duckdb").exists()


def test_without_a_warehouse_syntax_errors_are_still_caught(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"broken": "SELEC id FROM raw.orders"}, seed=False)
    result = run_ci(config)
    assert result.ci_exit_code == 1
    assert ("Error", "C003", "broken") in _codes(result)


def test_a_model_that_needs_a_var(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"v": "SELECT * FROM raw.orders WHERE id > {{ var('min_id') }}"})
    missing = run_ci(config)
    assert missing.ci_exit_code == 1 and not missing.compile_ok
    assert _codes(missing) == [("Error", "C002", "v")]
    given = run_ci(config, variables={"min_id": "0"})
    assert given.ci_exit_code == 0 and given.models_built == 1


def test_a_validation_error_stops_ci(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml='\n[pipeline.models.target]\nadapter = "nope"\n')
    result = run_ci(config)
    assert result.ci_exit_code == 1 and not result.compile_ok
    assert result.diagnostics[0].code == "V002"


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    ok = make_project(tmp_path / "ok", {"good": GOOD_SQL})
    proc = rocky(ok, "ci", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["command"] == "ci" and doc["exit_code"] == 0 and doc["diagnostics"] == []
    advisory = make_project(tmp_path / "advisory", {"good": GOOD_SQL}, seed=False)
    proc = rocky(advisory, "ci", "--output", "json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["exit_code"] == 4
    failing = make_project(tmp_path / "failing", {"bad": "SELECT nope FROM raw.orders"})
    proc = rocky(failing, "ci", "--output", "json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["exit_code"] == 1
