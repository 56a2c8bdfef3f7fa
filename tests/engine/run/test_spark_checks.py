"""`[checks]` and assertions of a transformation pipeline on Spark: their SQL goes through the Spark dialect.

The model has a column named `order` (reserved) and one with a space, so a check quoting identifiers the
ANSI way (double quotes: string literals in Spark SQL) would count a literal instead of the column and
pass when it should fail. regex_match is Spark's RLIKE; relationships resolves its parent table in
backticks. A failing error-severity assertion makes the run PartialFailure (exit 2), as on DuckDB.
"""

from __future__ import annotations

import pytest

from tests.fixtures.spark_project import SparkProject

pytestmark = pytest.mark.spark

CHECKS = """
[pipeline.models.checks]
row_count = true

[pipeline.models.checks.null_rate]
columns = ["order"]
threshold = 0.0
severity = "warning"

[[pipeline.models.checks.assertions]]
table = "fct"
type = "not_null"
column = "the value"

[[pipeline.models.checks.assertions]]
table = "fct"
type = "regex_match"
column = "code"
pattern = "^[A-Z]{2}[0-9]$"

[[pipeline.models.checks.assertions]]
table = "fct"
type = "relationships"
column = "order"
to_table = "dim"
to_column = "id"

[[pipeline.models.checks.assertions]]
table = "fct"
type = "unique"
column = "order"
"""


def _models(p: SparkProject, null_value: str) -> None:
    p.model("dim", "SELECT id FROM range(1, 4)")
    p.model("fct", f"""
        SELECT id AS `order`, CASE WHEN id = 2 THEN {null_value} ELSE id * 10 END AS `the value`,
               concat('AB', CAST(id AS STRING)) AS code
        FROM range(1, 4)
    """)


def _by_name(run_doc: dict[str, object], table: str) -> dict[str, dict[str, object]]:
    results = run_doc["check_results"]
    assert isinstance(results, list)
    (found,) = [r for r in results if r["asset_key"][-1] == table]
    return {c["name"]: c for c in found["checks"]}


def test_checks_and_assertions_run_on_spark_and_gate_the_run(spark_project: SparkProject) -> None:
    p = spark_project
    p.write_config(pipeline_extra=CHECKS)
    _models(p, "NULL")

    failing = p.run()
    assert failing.code == 2, failing.result.stderr[-3000:]
    assert failing.doc["status"] == "PartialFailure" and failing.doc["check_gate_failed"] is True
    checks = _by_name(failing.doc, "fct")
    assert checks["row_count"]["passed"] is True and checks["row_count"]["target_count"] == 3
    assert checks["not_null:the value"]["passed"] is False
    assert checks["not_null:the value"]["failing_rows"] == 1
    assert checks["regex_match:code"]["passed"] is True, checks["regex_match:code"]
    assert checks["relationships:order"]["passed"] is True, checks["relationships:order"]
    assert checks["unique:order"]["passed"] is True, checks["unique:order"]
    assert checks["null_rate"]["passed"] is True and checks["null_rate"]["null_rate"] == 0.0
    assert "error" not in checks["not_null:the value"]

    _models(p, "0")
    passing = p.run()
    assert passing.code == 0, passing.result.stderr[-3000:]
    assert passing.doc["status"] == "Success" and passing.doc["check_gate_failed"] is False
    assert all(c["passed"] for c in _by_name(passing.doc, "fct").values())
