"""Dagster Pipes: the engine-side reporter under a real Pipes session, and run_pipes end to end."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import dagster as dg

from dagster_rocky import RockyResource
from rocky_engine.run.output import RunOutput
from rocky_engine.run.pipes_report import report_to_pipes

ORDERS = dg.AssetKey(["duckdb", "orders", "orders"])
CUSTOMERS = dg.AssetKey(["duckdb", "orders", "customers"])
BROKEN = dg.AssetKey(["duckdb", "orders", "broken"])

# A run result as the engine builds it: two tables materialized, one failed, checks on orders.
REPORTER = textwrap.dedent(
    """
    from rocky_engine.run.output import RunOutput
    from rocky_engine.run.pipes_report import report_to_pipes

    out = RunOutput.model_validate({
        "status": "PartialFailure",
        "materializations": [
            {"asset_key": ["duckdb", "orders", "orders"], "duration_ms": 7, "rows_copied": 20000,
             "metadata": {"strategy": "incremental", "watermark": "2026-11-01T00:00:00",
                          "target_table_full_name": "playground.staging__orders.orders"}},
            {"asset_key": ["duckdb", "orders", "customers"], "duration_ms": 3, "rows_copied": 1000,
             "metadata": {"strategy": "incremental", "target_table_full_name": "p.s.customers"}},
            {"asset_key": ["duckdb", "orders", "unselected"], "duration_ms": 1,
             "metadata": {"strategy": "incremental", "target_table_full_name": "p.s.unselected"}},
        ],
        "check_results": [
            {"asset_key": ["duckdb", "orders", "orders"], "checks": [
                {"name": "row_count", "passed": True, "severity": "error", "source_count": 20500,
                 "target_count": 20500},
                {"name": "freshness", "passed": False, "severity": "warning", "lag_seconds": 99,
                 "threshold_seconds": 10},
                {"name": "not_declared", "passed": True, "severity": "error"},
            ]},
        ],
        "errors": [{"asset_key": ["duckdb", "orders", "broken"], "error": "boom", "failure_kind": "unknown"}],
    })
    print(report_to_pipes(out))
    """
)


def test_engine_reporter_sends_selected_materializations_and_declared_checks(tmp_path: Path) -> None:
    script = tmp_path / "reporter.py"
    script.write_text(REPORTER)

    @dg.multi_asset(
        specs=[dg.AssetSpec(k, skippable=True) for k in (ORDERS, CUSTOMERS, BROKEN)],
        check_specs=[
            dg.AssetCheckSpec("row_count", asset=ORDERS),
            dg.AssetCheckSpec("freshness", asset=ORDERS),
        ],
    )
    def replicated(context):  # type: ignore[no-untyped-def]
        with dg.open_pipes_session(
            context=context,
            context_injector=dg.PipesEnvContextInjector(),
            message_reader=dg.PipesTempFileMessageReader(),
            extras={
                "rocky": {
                    "check_keys": [
                        [list(k.asset_key.path), k.name] for k in context.selected_asset_check_keys
                    ]
                }
            },
        ) as session:
            import subprocess

            subprocess.run(
                [sys.executable, str(script)],
                env=session.get_bootstrap_env_vars()
                | {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                check=True,
            )
        yield from session.get_results(implicit_materializations=False)

    result = dg.materialize([replicated], raise_on_error=False)
    # Pipes steps must report every selected asset: the failed table fails the step, after the others.
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "duckdb__orders__broken" in str(failure.event_specific_data.error)  # type: ignore[union-attr]
    mats = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        mats[mat.asset_key] = mat.metadata
    assert set(mats) == {ORDERS, CUSTOMERS}  # not the failed table, not the unselected one
    # dagster/row_count is the table's rows after the run (the row_count check counted them), never the
    # rows copied; without a count there is none
    assert mats[ORDERS]["dagster/row_count"].value == 20500
    assert mats[ORDERS]["rocky/rows_copied"].value == 20000
    assert "dagster/row_count" not in mats[CUSTOMERS]
    assert mats[CUSTOMERS]["rocky/rows_copied"].value == 1000
    assert mats[ORDERS]["watermark"].value == "2026-11-01T00:00:00Z"
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert set(checks) == {"row_count", "freshness"}  # the undeclared check is not sent
    assert checks["row_count"].passed
    assert not checks["freshness"].passed
    assert checks["freshness"].severity == dg.AssetCheckSeverity.WARN


def test_reporter_is_a_no_op_outside_pipes() -> None:
    assert report_to_pipes(RunOutput(), environ={}) == 0


def test_run_pipes_end_to_end_on_the_playground(playground: Path) -> None:
    rocky = RockyResource(config_path=str(playground / "rocky.toml"))

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS, skippable=True), dg.AssetSpec(CUSTOMERS, skippable=True)])
    def orders(context, rocky: RockyResource):  # type: ignore[no-untyped-def]
        invocation = rocky.run_pipes(context, "id=raw__orders", pipeline="raw")
        assert invocation.run_result.status == "Success"
        yield from invocation.get_results()

    result = dg.materialize([orders], resources={"rocky": rocky})
    assert result.success
    keys = {
        e.event_specific_data.materialization.asset_key  # type: ignore[union-attr]
        for e in result.get_asset_materialization_events()
    }
    assert keys == {ORDERS, CUSTOMERS}


def test_drift_and_anomaly_reach_dagster_under_pipes(tmp_path: Path) -> None:
    """The real engine under run_pipes: an anomaly becomes an observation and a failed WARN
    row_count_anomaly result, a drift action an observation and the materialization's rocky/drift, as on
    the streaming path (the same builders)."""
    from dagster_rocky.check_names import ANOMALY_CHECK
    from tests.engine.replication.conftest import ReplicationProject

    shop = dg.AssetKey(["duckdb", "shop", "orders"])
    rp = ReplicationProject(tmp_path)
    checks = """
        [pipeline.raw.checks]
        row_count = true
        anomaly_threshold_pct = 50
    """
    rp.configure(strategy="full_refresh", sections=checks)
    rp.source_table("src__shop", "orders", rows=100)
    for _ in range(3):  # the anomaly baseline: three runs of 100 rows
        assert rp.run().status == "Success"
    rocky = RockyResource(config_path=str(rp.config))

    # can_subset: a declared check the run does not evaluate (no anomaly) is left unexecuted
    @dg.multi_asset(
        can_subset=True,
        specs=[dg.AssetSpec(shop, skippable=True)],
        check_specs=[dg.AssetCheckSpec(name, asset=shop) for name in (ANOMALY_CHECK, "row_count")],
    )
    def shop_orders(context, rocky: RockyResource):  # type: ignore[no-untyped-def]
        yield from rocky.run_pipes(context, pipeline="raw").get_results()

    def materialize() -> dg.ExecuteInProcessResult:
        return dg.materialize([shop_orders], resources={"rocky": rocky})

    rp.sql("DROP TABLE src__shop.orders")
    rp.source_table("src__shop", "orders", rows=5)
    result = materialize()
    assert result.success
    evaluations = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert set(evaluations) == {ANOMALY_CHECK, "row_count"}
    anomaly = evaluations[ANOMALY_CHECK]
    assert not anomaly.passed and anomaly.severity == dg.AssetCheckSeverity.WARN
    assert anomaly.metadata["current_count"].value == 5
    assert anomaly.metadata["baseline_avg"].value == 100.0
    (obs,) = [e.event_specific_data.asset_observation for e in result.all_events  # type: ignore[union-attr]
              if e.event_type_value == "ASSET_OBSERVATION"]
    assert obs.asset_key == shop and obs.description.startswith("row count anomaly")
    assert obs.metadata["current_count"].value == 5

    # an incremental copy evolves the target when the source gains a column: the drift action
    rp.configure(strategy="incremental", sections=checks)
    rp.sql("ALTER TABLE src__shop.orders ADD COLUMN extra INTEGER")
    result = materialize()
    assert result.success
    (obs,) = [e.event_specific_data.asset_observation for e in result.all_events  # type: ignore[union-attr]
              if e.event_type_value == "ASSET_OBSERVATION"
              and "rocky/drift_action" in e.event_specific_data.asset_observation.metadata]  # type: ignore[union-attr]
    assert obs.asset_key == shop
    assert obs.metadata["rocky/drift_action"].value == "add_column"
    assert obs.metadata["rocky/drift_columns"].value == ["extra"]
    (mat,) = result.get_asset_materialization_events()
    drift = mat.event_specific_data.materialization.metadata["rocky/drift"].value  # type: ignore[union-attr]
    assert [(d["action"], d["columns"]) for d in drift] == [("add_column", ["extra"])]
