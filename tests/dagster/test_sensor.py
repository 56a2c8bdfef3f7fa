"""rocky_source_sensor against the real engine: `rocky discover` over a project whose discovery is a local
fake Fivetran API, so last_sync_at values are real and the tests move them between ticks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dagster_rocky import (
    BacklogCap,
    EmitContext,
    FailedSourcesContext,
    RockyDagsterTranslator,
    RockyResource,
    SkipContext,
    rocky_source_sensor,
)
from dagster_rocky.types import SourceInfo, TableInfo
from tests.fixtures.fake_fivetran import Failure, FakeFivetran

SHOP_ORDERS = dg.AssetKey(["fivetran", "acme", "shopify", "orders"])
SHOP_CUSTOMERS = dg.AssetKey(["fivetran", "acme", "shopify", "customers"])
PAY_CHARGES = dg.AssetKey(["fivetran", "acme", "stripe", "charges"])
GLOB_ORDERS = dg.AssetKey(["fivetran", "globex", "shopify", "orders"])
ALL_KEYS = [SHOP_ORDERS, SHOP_CUSTOMERS, PAY_CHARGES, GLOB_ORDERS]

SHOP_SYNC = "2026-05-01T10:00:00+00:00"
PAY_SYNC = "2026-05-01T10:30:00+00:00"
GLOB_SYNC = "2026-05-01T07:00:00+00:00"  # the fake reports 09:00+02:00


def _tick(sensor: dg.SensorDefinition, **context: Any) -> dg.SensorResult:
    with dg.build_sensor_context(**context) as ctx:
        result = sensor(ctx)
    assert isinstance(result, dg.SensorResult)
    return result


def _by_key(result: dg.SensorResult) -> dict[str, dg.RunRequest]:
    return {r.run_key: r for r in result.run_requests or [] if r.run_key}


def test_keyed_resource_first_tick_emits_one_request_per_source(fivetran_project: Path) -> None:
    sensor = rocky_source_sensor(target=dg.AssetSelection.assets(*ALL_KEYS))
    assert sensor.name == "rocky_source_sensor"
    assert sensor.minimum_interval_seconds == 300
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert sensor.required_resource_keys == {"rocky"}
    result = _tick(sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))})
    requests = _by_key(result)
    assert set(requests) == {f"conn_shop-{SHOP_SYNC}", f"conn_pay-{PAY_SYNC}", f"conn_glob-{GLOB_SYNC}"}
    shop = requests[f"conn_shop-{SHOP_SYNC}"]
    assert shop.tags == {
        "rocky/sensor": "rocky_source_sensor",
        "rocky/source_id": "conn_shop",
        "rocky/sync_at": SHOP_SYNC,
    }
    assert list(shop.asset_selection or []) == [SHOP_CUSTOMERS, SHOP_ORDERS]
    assert json.loads(result.cursor or "") == {
        "conn_shop": SHOP_SYNC,
        "conn_pay": PAY_SYNC,
        "conn_glob": GLOB_SYNC,
    }


def test_unchanged_syncs_emit_nothing_and_new_sync_emits_only_that_source(
    fivetran_project: Path, fake_fivetran: FakeFivetran
) -> None:
    skips: list[SkipContext] = []
    sensor = rocky_source_sensor(target=ALL_KEYS, on_skip=skips.append)
    rocky = RockyResource(config_path=str(fivetran_project))
    first = _tick(sensor, resources={"rocky": rocky})
    second = _tick(sensor, resources={"rocky": rocky}, cursor=first.cursor)
    assert not second.run_requests
    assert second.skip_reason is not None
    assert second.cursor == first.cursor
    assert [(s.reason, s.cursor_size) for s in skips] == [("no_new_syncs", 3)]
    fake_fivetran.connectors["conn_shop"].succeeded_at = "2026-05-02T08:00:00Z"
    third = _tick(sensor, resources={"rocky": rocky}, cursor=second.cursor)
    assert list(_by_key(third)) == ["conn_shop-2026-05-02T08:00:00+00:00"]
    assert json.loads(third.cursor or "")["conn_shop"] == "2026-05-02T08:00:00+00:00"
    assert json.loads(third.cursor or "")["conn_pay"] == PAY_SYNC


def test_cursor_compares_parsed_datetimes_not_strings(fivetran_project: Path) -> None:
    # 09:30-02:00 is 11:30 UTC, later than conn_shop's 10:00 UTC sync, though it sorts lower as text.
    # 10:15+02:00 is 08:15 UTC, earlier than conn_pay's 10:30 UTC sync, though it sorts higher as text.
    cursor = json.dumps(
        {
            "conn_shop": "2026-05-01T09:30:00-02:00",
            "conn_pay": "2026-05-01T10:45:00+02:00",
            "conn_glob": GLOB_SYNC,
        }
    )
    sensor = rocky_source_sensor(target=ALL_KEYS)
    result = _tick(
        sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))}, cursor=cursor
    )
    assert list(_by_key(result)) == [f"conn_pay-{PAY_SYNC}"]
    new = json.loads(result.cursor or "")
    assert new["conn_shop"] == "2026-05-01T09:30:00-02:00"  # kept as it was
    assert new["conn_pay"] == PAY_SYNC


def test_failed_sources_warn_keep_cursor_fire_hook_and_healthy_sources_still_emit(
    fivetran_project: Path, fake_fivetran: FakeFivetran, capfd: pytest.CaptureFixture[str]
) -> None:
    failed_seen: list[FailedSourcesContext] = []
    sensor = rocky_source_sensor(target=ALL_KEYS, on_failed_sources=failed_seen.append)
    rocky = RockyResource(config_path=str(fivetran_project))
    cursor = json.dumps({"conn_pay": "2026-04-30T00:00:00+00:00"})
    fake_fivetran.schema_failures["conn_pay"] = Failure(status=503)
    result = _tick(sensor, resources={"rocky": rocky}, cursor=cursor)
    assert set(_by_key(result)) == {f"conn_shop-{SHOP_SYNC}", f"conn_glob-{GLOB_SYNC}"}
    assert json.loads(result.cursor or "")["conn_pay"] == "2026-04-30T00:00:00+00:00"  # not advanced
    (ctx,) = failed_seen
    assert [(f.id, f.schema_, f.error_class) for f in ctx.failed_sources] == [
        ("conn_pay", "src__acme__stripe", "transient")
    ]
    logged = capfd.readouterr().err
    assert "discover could not read 1 source(s)" in logged and "re-evaluated next tick: conn_pay" in logged
    # it recovers: the next tick emits the sync it could not read before
    fake_fivetran.schema_failures.clear()
    recovered = _tick(sensor, resources={"rocky": rocky}, cursor=result.cursor)
    assert list(_by_key(recovered)) == [f"conn_pay-{PAY_SYNC}"]


def test_a_source_never_seen_before_with_a_failure_is_not_in_the_cursor(
    fivetran_project: Path, fake_fivetran: FakeFivetran
) -> None:
    fake_fivetran.schema_failures["conn_glob"] = Failure(status=429, headers={"Retry-After": "30"})
    sensor = rocky_source_sensor(target=ALL_KEYS)
    result = _tick(sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))})
    assert "conn_glob" not in json.loads(result.cursor or "")


def test_instance_resource_form_needs_no_resources(fivetran_project: Path) -> None:
    sensor = rocky_source_sensor(
        rocky_resource=RockyResource(config_path=str(fivetran_project)), target=ALL_KEYS
    )
    assert not sensor.required_resource_keys
    result = _tick(sensor)
    assert len(result.run_requests or []) == 3


def test_custom_resource_key(fivetran_project: Path) -> None:
    sensor = rocky_source_sensor(rocky_resource="my_rocky", target=ALL_KEYS)
    assert sensor.required_resource_keys == {"my_rocky"}
    result = _tick(sensor, resources={"my_rocky": RockyResource(config_path=str(fivetran_project))})
    assert len(result.run_requests or []) == 3


def test_per_group_bundles_sources_of_a_group(fivetran_project: Path) -> None:
    emitted: list[EmitContext] = []
    sensor = rocky_source_sensor(
        target=ALL_KEYS, granularity="per_group", on_run_request_emitted=emitted.append
    )
    result = _tick(sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))})
    requests = _by_key(result)
    assert set(requests) == {f"acme-{PAY_SYNC}", f"globex-{GLOB_SYNC}"}
    acme = requests[f"acme-{PAY_SYNC}"]
    assert acme.tags == {
        "rocky/sensor": "rocky_source_sensor",
        "rocky/group": "acme",
        "rocky/sync_at": PAY_SYNC,
    }
    assert set(acme.asset_selection or []) == {SHOP_ORDERS, SHOP_CUSTOMERS, PAY_CHARGES}
    by_group = {e.run_request.tags["rocky/group"]: e for e in emitted}
    assert sorted(s.id for s in by_group["acme"].sources) == ["conn_pay", "conn_shop"]
    assert by_group["acme"].granularity == "per_group"


def _plant(
    instance: dg.DagsterInstance, run_id: str, status: dg.DagsterRunStatus, tags: dict[str, str]
) -> None:
    instance.add_run(dg.DagsterRun(job_name="rocky_job", run_id=run_id, status=status, tags=tags))


def test_backlog_cap_counts_only_this_sensors_in_flight_runs(fivetran_project: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    own = {"rocky/sensor": "rocky_source_sensor", "rocky/source_id": "conn_shop"}
    _plant(instance, "r1", dg.DagsterRunStatus.STARTED, own)
    _plant(instance, "r2", dg.DagsterRunStatus.STARTING, own)
    _plant(instance, "r3", dg.DagsterRunStatus.SUCCESS, own)  # finished: not in flight
    _plant(
        instance, "r4", dg.DagsterRunStatus.STARTED, {"rocky/sensor": "other", "rocky/source_id": "conn_pay"}
    )
    _plant(instance, "r5", dg.DagsterRunStatus.STARTED, {"rocky/source_id": "conn_pay"})  # unrelated job
    _plant(
        instance,
        "r6",
        dg.DagsterRunStatus.STARTED,
        {"rocky/sensor": "rocky_source_sensor", "rocky/source_id": "conn_pay"},
    )
    emitted: list[EmitContext] = []
    sensor = rocky_source_sensor(
        target=ALL_KEYS,
        backlog_cap=BacklogCap(tag_key="rocky/source_id", max_in_flight=2),
        on_run_request_emitted=emitted.append,
    )
    result = _tick(
        sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))}, instance=instance
    )
    # conn_shop has 2 of its own in flight (cap 2): suppressed; conn_pay has 1 of its own: emitted
    assert set(_by_key(result)) == {f"conn_pay-{PAY_SYNC}", f"conn_glob-{GLOB_SYNC}"}
    assert json.loads(result.cursor or "")["conn_shop"] == SHOP_SYNC  # the cursor still advanced
    assert sorted(e.run_request.tags["rocky/source_id"] for e in emitted) == ["conn_glob", "conn_pay"]


def test_backlog_cap_statuses_and_scope_tags(fivetran_project: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    own = {"rocky/sensor": "rocky_source_sensor", "rocky/source_id": "conn_shop"}
    _plant(instance, "r1", dg.DagsterRunStatus.STARTED, {**own, "team": "a"})
    _plant(instance, "r2", dg.DagsterRunStatus.FAILURE, {**own, "team": "b"})
    rocky = RockyResource(config_path=str(fivetran_project))
    scoped = rocky_source_sensor(
        target=ALL_KEYS, backlog_cap=BacklogCap("rocky/source_id", 1, scope_tags={"team": "b"})
    )
    assert f"conn_shop-{SHOP_SYNC}" in _by_key(_tick(scoped, resources={"rocky": rocky}, instance=instance))
    failures_count = rocky_source_sensor(
        target=ALL_KEYS, backlog_cap=BacklogCap("rocky/source_id", 1, statuses=(dg.DagsterRunStatus.FAILURE,))
    )
    result = _tick(failures_count, resources={"rocky": rocky}, instance=instance)
    assert f"conn_shop-{SHOP_SYNC}" not in _by_key(result)


def test_everything_suppressed_reports_backlog_cap_skip(fivetran_project: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    for i, group in enumerate(["acme", "globex"]):
        _plant(
            instance,
            f"r{i}",
            dg.DagsterRunStatus.STARTED,
            {"rocky/sensor": "rocky_source_sensor", "rocky/group": group},
        )
    skips: list[SkipContext] = []
    sensor = rocky_source_sensor(
        target=ALL_KEYS,
        granularity="per_group",
        on_skip=skips.append,
        backlog_cap=BacklogCap("rocky/group", 1),
    )
    result = _tick(
        sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))}, instance=instance
    )
    assert not result.run_requests
    assert [s.reason for s in skips] == ["backlog_cap"]
    assert len(json.loads(result.cursor or "")) == 3


def test_hooks_are_best_effort(
    fivetran_project: Path, fake_fivetran: FakeFivetran, capfd: pytest.CaptureFixture[str]
) -> None:
    def boom(_ctx: object) -> None:
        raise RuntimeError("metrics backend down")

    fake_fivetran.schema_failures["conn_pay"] = Failure(status=500)
    sensor = rocky_source_sensor(target=ALL_KEYS, on_run_request_emitted=boom, on_failed_sources=boom)
    result = _tick(sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))})
    assert len(result.run_requests or []) == 2
    warnings = [line for line in capfd.readouterr().err.splitlines() if "metrics backend down" in line]
    assert len(warnings) == 3  # two emits and one failed-sources call, each logged, none fatal
    assert all("RuntimeError" in w for w in warnings)


def test_hook_contexts_are_frozen(fivetran_project: Path) -> None:
    seen: list[EmitContext] = []
    sensor = rocky_source_sensor(target=ALL_KEYS, on_run_request_emitted=seen.append)
    _tick(sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))})
    with pytest.raises(AttributeError):
        seen[0].granularity = "x"  # type: ignore[misc]


class Flat(RockyDagsterTranslator):
    def get_asset_key(self, source: SourceInfo, table: TableInfo) -> dg.AssetKey:
        return dg.AssetKey(["lake", source.id, table.name])


def test_custom_translator_keys(fivetran_project: Path) -> None:
    sensor = rocky_source_sensor(target=ALL_KEYS, translator=Flat())
    result = _tick(sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))})
    keys = {k for r in result.run_requests or [] for k in r.asset_selection or []}
    assert dg.AssetKey(["lake", "conn_pay", "charges"]) in keys


def test_requests_are_limited_to_the_target_when_the_repository_is_known(fivetran_project: Path) -> None:
    specs = [dg.AssetSpec(k) for k in ALL_KEYS]
    sensor = rocky_source_sensor(target=dg.AssetSelection.assets(SHOP_ORDERS, GLOB_ORDERS))
    rocky = RockyResource(config_path=str(fivetran_project))
    defs = dg.Definitions(assets=specs, sensors=[sensor], resources={"rocky": rocky})
    result = _tick(sensor, definitions=defs, resources={"rocky": rocky})
    requests = _by_key(result)
    assert set(requests) == {f"conn_shop-{SHOP_SYNC}", f"conn_glob-{GLOB_SYNC}"}  # conn_pay: nothing targeted
    assert list(requests[f"conn_shop-{SHOP_SYNC}"].asset_selection or []) == [SHOP_ORDERS]


def test_tenant_mode_adds_partitions_and_emits_partitioned_requests(fivetran_project: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("tenants", ["acme"])
    sensor = rocky_source_sensor(
        target=dg.AssetSelection.all(), tenant_component="tenant", tenant_partitions_name="tenants"
    )
    result = _tick(
        sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))}, instance=instance
    )
    (add,) = result.dynamic_partitions_requests or []
    assert isinstance(add, dg.AddDynamicPartitionsRequest)
    assert (add.partitions_def_name, list(add.partition_keys)) == ("tenants", ["globex"])
    requests = _by_key(result)
    glob = requests[f"conn_glob-{GLOB_SYNC}"]
    assert glob.partition_key == "globex"
    assert list(glob.asset_selection or []) == [dg.AssetKey(["fivetran", "shopify", "orders"])]
    assert requests[f"conn_shop-{SHOP_SYNC}"].partition_key == "acme"


def test_tenant_mode_without_sync_rolls_back_skipped_sources(fivetran_project: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("tenants", ["acme"])
    sensor = rocky_source_sensor(
        target=dg.AssetSelection.all(),
        tenant_component="tenant",
        tenant_partitions_name="tenants",
        sync_partitions_from_discover=False,
    )
    rocky = RockyResource(config_path=str(fivetran_project))
    result = _tick(sensor, resources={"rocky": rocky}, instance=instance)
    assert not result.dynamic_partitions_requests
    assert f"conn_glob-{GLOB_SYNC}" not in _by_key(result)
    assert "conn_glob" not in json.loads(result.cursor or "")  # rolled back: re-evaluated next tick
    instance.add_dynamic_partitions("tenants", ["globex"])
    again = _tick(sensor, resources={"rocky": rocky}, instance=instance, cursor=result.cursor)
    assert list(_by_key(again)) == [f"conn_glob-{GLOB_SYNC}"]


def test_definition_time_validation() -> None:
    with pytest.raises(ValueError, match="tenant_partitions_name is missing"):
        rocky_source_sensor(target=ALL_KEYS, tenant_component="tenant")
    with pytest.raises(ValueError, match="tenant_component is missing"):
        rocky_source_sensor(target=ALL_KEYS, tenant_partitions_name="tenants")
    with pytest.raises(ValueError, match="granularity must be"):
        rocky_source_sensor(target=ALL_KEYS, granularity="per_table")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_in_flight must be at least 1"):
        BacklogCap("rocky/group", 0)


def test_unreadable_cursor_starts_over(fivetran_project: Path, capfd: pytest.CaptureFixture[str]) -> None:
    sensor = rocky_source_sensor(target=ALL_KEYS)
    result = _tick(
        sensor, resources={"rocky": RockyResource(config_path=str(fivetran_project))}, cursor="{oops"
    )
    assert len(result.run_requests or []) == 3
    assert "cursor is not JSON" in capfd.readouterr().err
