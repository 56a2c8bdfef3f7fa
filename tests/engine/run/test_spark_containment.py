"""Containment on Spark: a failing model fails alone, its downstream is withheld, the rest builds; the run
is PartialFailure with exit 2 and the same JSON as on DuckDB. Models run concurrently (--parallel 3)."""

from __future__ import annotations

import pytest

from tests.fixtures.spark_project import SparkProject

pytestmark = pytest.mark.spark


def test_a_failing_model_fails_alone_and_its_downstream_is_withheld(spark_project: SparkProject) -> None:
    p = spark_project
    p.model("vals", "SELECT * FROM VALUES ('1'), ('2'), ('abc') AS v(code)")
    p.model("bad_cast", "SELECT CAST(code AS INT) AS n FROM vals")  # fails at run time (ANSI cast)
    p.model("bad_child", "SELECT * FROM bad_cast")
    p.model("missing_col", "SELECT no_such_column FROM vals")
    p.model("good", "SELECT CAST(code AS INT) AS n FROM vals WHERE code <> 'abc'")
    p.model("good_child", "SELECT sum(n) AS total FROM good")

    run = p.run("--parallel", "3")
    assert run.code == 2, run.result.stderr[-3000:]
    doc = run.doc
    assert doc["status"] == "PartialFailure"
    assert doc["execution"]["concurrency"] == 3
    assert sorted(run.by_model()) == ["good", "good_child", "vals"]
    assert p.rows("good_child") == [(3,)]
    relations = p.relations()
    for absent in ("bad_cast", "bad_child", "missing_col"):
        assert absent not in relations
    errors = run.errors()
    assert set(errors) == {"bad_cast", "missing_col"}
    assert "CAST_INVALID_INPUT" in errors["bad_cast"]["error"] and "'abc'" in errors["bad_cast"]["error"]
    assert "\n" not in errors["bad_cast"]["error"]
    assert errors["bad_cast"]["failure_kind"] == "query-rejected"
    assert "no_such_column" in errors["missing_col"]["error"]
    assert errors["missing_col"]["failure_kind"] in ("query-rejected", "not-found")
    assert doc["contained"] == [{
        "model": "bad_child",
        "blocked_by": ["bad_cast"],
        "unblock_hint": "fix bad_cast and run again"
        " (or `rocky run --pipeline models --model bad_child` once the upstream is rebuilt)",
    }]
    assert doc["tables_failed"] == 2 and doc["tables_copied"] == 3
