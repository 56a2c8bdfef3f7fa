"""Check results as a discriminated union: each JSON object reads as the model of its kind (whatever name a
user gave it), an unknown kind keeps every key, and the history value comes from the typed model; plus the
one materialization / check metadata builder both Dagster paths use."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from rocky_engine.checks.history import check_records, check_value
from rocky_engine.checks.table_checks import TableCheckOutcome
from rocky_engine.state.check_history import ROW_COUNT
from rocky_engine.wire.checks import (
    ASSERTION_BY_KIND,
    AggregateAssertion,
    CheckResult,
    ColumnMatchCheck,
    CompositeAssertion,
    CustomCheck,
    FreshnessCheck,
    NullRateCheck,
    RowCountCheck,
    RowCountRangeAssertion,
    TableCheckResult,
    UnknownCheck,
    check_tag,
)
from rocky_engine.wire.metadata import (
    check_metadata,
    dagster_severity,
    materialization_metadata,
    row_counts_after_run,
)
from rocky_engine.wire.run import MaterializationInfo, RunResult
from tests.engine.wire.strict import assert_strict

HEAD = {"passed": True, "severity": "error"}

CASES: list[tuple[dict[str, Any], type[CheckResult], float | int | None]] = [
    ({"name": "row_count", **HEAD, "source_count": 5, "target_count": 5}, RowCountCheck, 5),
    # the error is written under the published name too
    ({"name": "row_count", "passed": False, "severity": "error", "error": "boom", "not_evaluated": "boom"},
     RowCountCheck, None),
    ({"name": "column_match", **HEAD, "missing": [], "extra": []}, ColumnMatchCheck, None),
    ({"name": "freshness", **HEAD, "lag_seconds": 7, "threshold_seconds": 60}, FreshnessCheck, 7),
    ({"name": "null_rate", **HEAD, "column": "email", "null_rate": 0.25, "threshold": 0.5}, NullRateCheck,
     0.25),
    ({"name": "mine", **HEAD, "query": "SELECT 1", "result_value": 3}, CustomCheck, 3),
    ({"name": "mine", **HEAD, "query": "SELECT NULL", "result_value": None}, CustomCheck, None),
    ({"name": "mine", **HEAD, "query": "SELECT 'x'", "result_value": "x"}, CustomCheck, None),
    # a user may name a custom check like a built-in one: the query tells it apart
    ({"name": "freshness", **HEAD, "query": "SELECT 1", "result_value": 1}, CustomCheck, 1),
    ({"name": "nn", **HEAD, "kind": "not_null", "column": "id", "failing_rows": 0},
     ASSERTION_BY_KIND["not_null"], 0),
    ({"name": "c", **HEAD, "kind": "composite", "failing_rows": 2, "columns": ["a", "b"]},
     CompositeAssertion, 2),
    ({"name": "r", **HEAD, "kind": "row_count_range", "failing_rows": 0, "row_count": 3, "min": 1},
     RowCountRangeAssertion, 0),
    ({"name": "a", **HEAD, "kind": "aggregate", "failing_rows": 1, "actual": None, "op": "sum", "cmp": ">",
      "value": 0}, AggregateAssertion, 1),
]


@pytest.mark.parametrize(("doc", "model", "value"), CASES)
def test_each_kind_reads_as_its_model_and_writes_back_unchanged(
    doc: dict[str, Any], model: type[CheckResult], value: float | int | None
) -> None:
    table = assert_strict({"asset_key": ["a"], "checks": [doc]}, TableCheckResult)
    [check] = table.checks
    assert type(check) is model and check_tag(doc) == model.TAG
    assert check.number() == value
    assert check.details == {k: v for k, v in doc.items() if k not in ("name", "passed", "severity")}


def test_every_assertion_kind_has_its_model() -> None:
    from typing import get_args

    from rocky_engine.config.checks import Assertion

    kinds = set(get_args(Assertion.model_fields["type"].annotation))
    assert kinds == set(ASSERTION_BY_KIND)


def test_an_unknown_kind_keeps_every_key() -> None:
    doc = {"name": "drift_score", **HEAD, "score": 0.9, "window": {"days": 7}}
    [check] = TableCheckResult.model_validate({"asset_key": ["a"], "checks": [doc]}).checks
    assert isinstance(check, UnknownCheck)
    assert check.details == {"score": 0.9, "window": {"days": 7}} and check.wire() == doc
    # and the strict reading refuses it: the engine never prints a check of no known kind
    with pytest.raises(AssertionError, match="a check of no known kind"):
        assert_strict({"asset_key": ["a"], "checks": [doc]}, TableCheckResult)


def test_a_known_kind_with_a_key_it_does_not_declare_is_caught_strictly() -> None:
    doc = {"name": "row_count", **HEAD, "target_count": 5, "target_rows": 5}
    assert RowCountCheck.model_validate(doc).target_count == 5  # a reader ignores it
    with pytest.raises(AssertionError, match="target_rows"):
        assert_strict({"asset_key": ["a"], "checks": [doc]}, TableCheckResult)


def _outcome(*checks: CheckResult, row_count: int | None = None) -> TableCheckOutcome:
    return TableCheckOutcome(result=TableCheckResult(asset_key=["wh", "s", "t"], checks=list(checks)),
                             row_count=row_count)


def test_history_records_read_the_number_from_the_typed_check() -> None:
    outcome = _outcome(
        RowCountCheck(passed=True, target_count=9),
        FreshnessCheck(passed=False, severity="warning", lag_seconds=99, threshold_seconds=60),
        CustomCheck(name="big", passed=True, query="q", result_value=2.5),
        ASSERTION_BY_KIND["unique"](name="u", passed=False, kind="unique", column="id", failing_rows=4),
        row_count=9,
    )
    records = check_records("run-1", "wh.s.t", outcome)
    assert [(r.check_name, r.value, r.passed, r.severity) for r in records] == [
        ("row_count", 9, True, "error"), ("freshness", 99, False, "warning"), ("big", 2.5, True, "error"),
        ("u", 4, False, "error"),
    ]
    assert records[1].detail == {"lag_seconds": 99, "threshold_seconds": 60}
    assert records[3].detail == {"kind": "unique", "column": "id", "failing_rows": 4}


def test_only_the_row_count_check_feeds_the_row_count_baseline() -> None:
    # checks a user named row_count keep their number in the detail, out of the anomaly baseline
    custom = CustomCheck(name=ROW_COUNT, passed=True, query="q", result_value=1000)
    assertion = ASSERTION_BY_KIND["row_count_range"](name=ROW_COUNT, passed=True, kind="row_count_range",
                                                     failing_rows=0)
    assert check_value(custom) is None and check_value(assertion) is None
    assert check_value(RowCountCheck(passed=True, target_count=3)) == 3
    [record] = check_records("r", "k", _outcome(custom))
    assert record.value is None and record.detail["result_value"] == 1000


def test_the_check_gate_is_a_failed_error_severity_check() -> None:
    assert RowCountCheck(passed=False, severity="error").fails_gate
    assert not FreshnessCheck(passed=False, severity="warning").fails_gate
    assert not _outcome(FreshnessCheck(passed=False, severity="warning")).error_failed()
    assert _outcome(RowCountCheck(passed=False)).error_failed()


def test_materialization_metadata_is_built_once_for_both_sides() -> None:
    mat = MaterializationInfo.model_validate({
        "asset_key": ["a", "b"], "duration_ms": 7, "rows_copied": 0, "started_at": "2026-05-02T03:00:00Z",
        "metadata": {"strategy": "incremental", "watermark": "2026-05-01T00:00:00",
                     "target_table_full_name": "wh.s.t", "column_count": 4},
    })
    assert materialization_metadata(mat, "run-1") == {
        "dagster/duration_ms": 7, "duration_ms": 7, "strategy": "incremental",
        "target_table_full_name": "wh.s.t", "dagster/table_name": "wh.s.t", "rocky/rows_copied": 0,
        "rows_copied": 0,
        # a naive timestamp watermark is UTC, written with Z (the published client requires an offset)
        "watermark": "2026-05-01T00:00:00Z", "column_count": 4, "started_at": "2026-05-02T03:00:00Z",
        # when the engine finished it: started_at plus the duration, unless an event's time is given
        "rocky/finished_at": datetime(2026, 5, 2, 3, 0, 0, 7000, tzinfo=UTC).timestamp(),
        "rocky/run_id": "run-1",
    }
    finished = datetime(2026, 5, 2, 3, 0, 1, tzinfo=UTC)
    assert materialization_metadata(mat, pipeline="raw", finished_at=finished)["rocky/finished_at"] == (
        finished.timestamp())
    assert materialization_metadata(mat, pipeline="raw")["rocky/pipeline"] == "raw"
    # the table's count after the run, when it was counted, is Dagster's row count (not the rows copied)
    assert materialization_metadata(mat, "run-1", 40)["dagster/row_count"] == 40
    assert row_counts_after_run([TableCheckResult.model_validate(
        {"asset_key": ["a", "b"], "checks": [{"name": "row_count", **HEAD, "target_count": 40}]})]) == {
        ("a", "b"): 40}
    bare = MaterializationInfo(asset_key=["a"])
    assert materialization_metadata(bare) == {"dagster/duration_ms": 0, "duration_ms": 0}


def test_check_metadata_drops_nulls_and_names_the_dagster_severity() -> None:
    check = CustomCheck(name="c", passed=True, severity="warning", query="q", result_value=None)
    assert check_metadata(check) == {"query": "q"} and dagster_severity(check) == "WARN"
    assert dagster_severity(RowCountCheck(passed=True)) == "ERROR"


def test_the_two_dagster_paths_share_the_builder() -> None:
    """The engine's Pipes reporter and the integration's event builder both call the wire builder (no copy
    of it left in either)."""
    import inspect

    import dagster_rocky.streaming as streaming
    import rocky_engine.run.pipes_report as pipes_report

    for module in (streaming, pipes_report):
        source = inspect.getsource(module)
        assert "materialization_metadata(" in source and "def materialization_metadata" not in source
        assert "check_metadata(" in source


def test_check_gate_failed_is_one_boolean_on_both_sides() -> None:
    assert RunResult.model_validate({}).check_gate_failed is False
    assert RunResult().wire()["check_gate_failed"] is False
    assert RunResult(check_gate_failed=True).wire()["check_gate_failed"] is True
