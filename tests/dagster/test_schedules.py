"""build_rocky_schedule and the automation-condition helpers, evaluated by real Dagster."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from dagster_rocky import (
    RockyResource,
    build_rocky_assets,
    build_rocky_schedule,
    rocky_cron_automation,
    rocky_eager_automation,
)

KEYS = [dg.AssetKey(["duckdb", "orders", "orders"]), dg.AssetKey(["duckdb", "payments", "payments"])]


def test_schedule_defaults_and_run_tag() -> None:
    schedule = build_rocky_schedule(
        name="daily_marts", cron_schedule="0 6 * * *", target=dg.AssetSelection.assets(*KEYS)
    )
    assert schedule.name == "daily_marts"
    assert schedule.cron_schedule == "0 6 * * *"
    assert schedule.execution_timezone == "UTC"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.description is None
    defs = dg.Definitions(assets=[dg.AssetSpec(k) for k in KEYS], schedules=[schedule])
    with dg.build_schedule_context(scheduled_execution_time=None) as ctx:
        data = schedule.evaluate_tick(ctx)
    (request,) = data.run_requests or []
    assert request.tags["rocky/schedule"] == "daily_marts"
    assert defs.resolve_schedule_def("daily_marts") is not None


def test_user_tags_merge_on_top_and_win() -> None:
    schedule = build_rocky_schedule(
        name="nightly",
        cron_schedule="0 2 * * *",
        target=KEYS,
        timezone="America/Los_Angeles",
        tags={"team": "data", "rocky/schedule": "custom"},
        description="nightly replication",
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    assert schedule.tags == {"rocky/schedule": "custom", "team": "data"}
    assert schedule.execution_timezone == "America/Los_Angeles"
    assert schedule.description == "nightly replication"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_schedule_over_factory_assets_resolves(playground: Path) -> None:
    rocky = RockyResource(config_path=str(playground / "rocky.toml"))
    assets = build_rocky_assets(rocky, pipeline="raw")
    schedule = build_rocky_schedule(name="raw_hourly", cron_schedule="0 * * * *", target=assets[0])
    defs = dg.Definitions(assets=assets, schedules=[schedule], resources={"rocky": rocky})
    job = defs.resolve_job_def(schedule.job_name)
    assert job.asset_layer.selected_asset_keys == set(assets[0].keys)


def test_automation_helpers_are_the_dagster_conditions() -> None:
    assert rocky_eager_automation() == dg.AutomationCondition.eager()
    cron = rocky_cron_automation("0 6 * * *", "America/Los_Angeles")
    assert cron == dg.AutomationCondition.on_cron("0 6 * * *", "America/Los_Angeles")
    assert rocky_cron_automation("0 6 * * *") == dg.AutomationCondition.on_cron("0 6 * * *", "UTC")


def test_eager_condition_requests_downstream_after_upstream_update() -> None:
    spec_up = dg.AssetSpec("raw_orders")
    spec_down = dg.AssetSpec("stg_orders", deps=["raw_orders"], automation_condition=rocky_eager_automation())
    instance = dg.DagsterInstance.ephemeral()
    defs = dg.Definitions(assets=[spec_up, spec_down])
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert first.total_requested == 0
    instance.report_runless_asset_event(dg.AssetMaterialization("raw_orders"))
    second = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert second.get_requested_partitions(dg.AssetKey("stg_orders")) == {None}
