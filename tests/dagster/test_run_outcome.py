"""The Dagster step agrees with the engine's run outcome when the failure is not any one table's.

The real engine on a copy of the playground: an ``abort`` hook at ``pipeline_complete`` turns a run whose
tables all landed into a ``Failure`` (exit 1) with an error of the whole run (empty ``asset_key``); a
model withheld behind a failed upstream (``contained``) has no error of its own. Dagster must report what
did materialize, then fail the step with the engine's words (and its "what to do").
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dagster_rocky import RockyResource
from dagster_rocky.assets import build_rocky_assets
from dagster_rocky.models import build_rocky_model_assets

ABORT_HOOK = '\n[[hook.on_pipeline_complete]]\ncommand = "exit 4"\non_failure = "abort"\n'
HOOK_TEXT = "aborted by hook on_pipeline_complete[0] (exit) exited with code 4"
ORDERS = dg.AssetKey(["duckdb", "orders", "orders"])
CUSTOMERS = dg.AssetKey(["duckdb", "orders", "customers"])
STG_ORDERS = dg.AssetKey(["playground", "staging", "stg_orders"])
FCT_ORDERS = dg.AssetKey(["playground", "marts", "fct_orders"])


def _replicated(playground: Path) -> RockyResource:
    """The playground with its raw tables replicated (what the models read)."""
    rocky = RockyResource(config_path=str(playground / "rocky.toml"))
    assert rocky.run(pipeline="raw").status == "Success"
    return rocky


def _step_failure(result: dg.ExecuteInProcessResult, step: str) -> str:
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE" and e.step_key == step]
    return str(failure.event_specific_data.error.message)  # type: ignore[union-attr]


def _materialized(result: dg.ExecuteInProcessResult) -> list[dg.AssetKey]:
    return [e.asset_key for e in result.get_asset_materialization_events() if e.asset_key is not None]


@pytest.mark.slow
def test_a_run_level_abort_fails_the_replication_step_after_its_tables_are_reported(
    playground: Path,
) -> None:
    config = playground / "rocky.toml"
    config.write_text(config.read_text() + ABORT_HOOK)
    rocky = RockyResource(config_path=str(config))
    assets = build_rocky_assets(rocky, pipeline="raw", pool=None)
    result = dg.materialize(
        assets, selection=[ORDERS, CUSTOMERS], resources={"rocky": rocky}, raise_on_error=False
    )
    # the engine: every table landed, then the hook made the run a Failure (exit 1)
    assert sorted(_materialized(result), key=str) == sorted([ORDERS, CUSTOMERS], key=str)
    assert not result.success
    message = _step_failure(result, "rocky_orders")
    assert HOOK_TEXT in message and 'set on_failure = "warn"' in message


@pytest.mark.slow
def test_a_run_level_abort_fails_the_model_step_and_the_quality_step(playground: Path) -> None:
    rocky = _replicated(playground)
    config = playground / "rocky.toml"
    config.write_text(config.read_text() + ABORT_HOOK)
    assets = build_rocky_model_assets(rocky, pool=None)
    result = dg.materialize(assets, resources={"rocky": rocky}, raise_on_error=False)
    assert STG_ORDERS in _materialized(result) and FCT_ORDERS in _materialized(result)
    assert not result.success
    assert HOOK_TEXT in _step_failure(result, "rocky_models")
    # the quality run's own pipeline_complete hook aborts it too: its step fails, its checks still report
    checks = dg.materialize(
        assets,
        selection=dg.AssetSelection.checks_for_assets(FCT_ORDERS),
        resources={"rocky": rocky},
        raise_on_error=False,
    )
    assert {c.check_name for c in checks.get_asset_check_evaluations()} == {
        "not_null_order_id",
        "unique_order_id",
    }
    assert not checks.success
    assert HOOK_TEXT in _step_failure(checks, "rocky_quality_checks")


@pytest.mark.slow
def test_models_withheld_behind_a_failed_upstream_are_named_with_what_to_do(playground: Path) -> None:
    rocky = _replicated(playground)
    sql = playground / "models" / "intermediate" / "int_order_payments.sql"
    sql.write_text(sql.read_text().replace("SELECT", "SELECT no_such_column,", 1))
    result = dg.materialize(
        build_rocky_model_assets(rocky, pool=None), resources={"rocky": rocky}, raise_on_error=False
    )
    assert not result.success
    assert FCT_ORDERS not in _materialized(result)
    message = _step_failure(result, "rocky_models")
    assert "int_order_payments (not-found)" in message
    assert (
        "fct_orders was not run (blocked by int_order_payments): fix int_order_payments and run again"
        in message
    )
