"""Rocky check names become valid Dagster names by one rule, for the specs and for the results."""

from __future__ import annotations

import dagster as dg

from dagster_rocky.check_names import ANOMALY_CHECK, dagster_check_name


def test_upstream_default_names_are_valid_dagster_names() -> None:
    assert dagster_check_name("not_null:id") == "not_null_id"
    assert dagster_check_name("accepted_values:status") == "accepted_values_status"
    assert dagster_check_name("row count (orders)") == "row_count__orders_"
    assert dagster_check_name("whatever", "anomaly") == ANOMALY_CHECK


def test_a_spec_and_its_result_meet_under_the_dagster_name() -> None:
    name = dagster_check_name("not_null:id")

    @dg.asset(check_specs=[dg.AssetCheckSpec(name, asset="orders")])
    def orders() -> dg.MaterializeResult:
        return dg.MaterializeResult(check_results=[dg.AssetCheckResult(check_name=name, passed=True)])

    result = dg.materialize([orders])  # Dagster refuses "not_null:id" at definition time
    [evaluation] = result.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed) == ("not_null_id", True)
