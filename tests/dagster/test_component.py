"""RockyComponent resolved from defs.yaml in a real component tree, against the real engine."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox

from dagster_rocky import RockyComponent, RockyDagsterTranslator, RockyResource
from dagster_rocky.types import DagNode, SourceInfo, TableInfo

ORDERS = dg.AssetKey(["duckdb", "orders", "orders"])
FCT_ORDERS = dg.AssetKey(["playground", "marts", "fct_orders"])


@pytest.fixture
def sandbox() -> Iterator[Any]:
    with create_defs_folder_sandbox() as box:
        yield box


def _component_dir(sandbox: Any, attributes: dict[str, Any], project: Path | None = None) -> Path:
    path = sandbox.defs_folder_path / "rocky_project"
    path.mkdir(parents=True, exist_ok=True)
    if project is not None:
        shutil.copytree(project, path / "config")
    (path / "defs.yaml").write_text(
        yaml.safe_dump({"type": "dagster_rocky.RockyComponent", "attributes": attributes})
    )
    return path


def test_component_from_yaml_builds_assets_checks_sensor_and_resource(sandbox: Any, playground: Path) -> None:
    path = _component_dir(
        sandbox,
        {
            "config_path": "config/rocky.toml",
            "pipeline": "raw",
            "enable_sensor": True,
            "sensor_granularity": "per_group",
            "sensor_interval_seconds": 120,
            "op_tags": {"team": "data"},
        },
        project=playground,
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
        assert isinstance(component, RockyComponent)
        assert component.config_path == "config/rocky.toml"
        specs = {s.key: s for s in defs.resolve_all_asset_specs()}
        assert ORDERS in specs
        assert specs[ORDERS].group_name == "orders"
        # the models come from `rocky dag`; the only configured checks are the quality assertions
        upstream = dg.AssetKey(["playground", "intermediate", "int_order_payments"])
        assert [d.asset_key for d in specs[FCT_ORDERS].deps] == [upstream]
        check_keys = defs.resolve_asset_graph().asset_check_keys
        assert {(k.asset_key, k.name) for k in check_keys} == {
            (FCT_ORDERS, "not_null_order_id"),
            (FCT_ORDERS, "unique_order_id"),
        }
        sensor = defs.resolve_sensor_def("config_rocky_source_sensor")  # a valid name from config/rocky.toml
        assert sensor.minimum_interval_seconds == 120
        assert sensor.required_resource_keys == {"rocky"}
        assets_def = defs.resolve_assets_def(ORDERS)
        assert assets_def.node_def.name == "config_rocky_orders"
        assert assets_def.op.tags["team"] == "data"
        assert assets_def.op.pool == "rocky"  # every Rocky step shares the project's pool
        assert defs.resolve_assets_def(FCT_ORDERS).op.pool == "rocky"
        resource = defs.resources["rocky"]
        assert isinstance(resource, RockyResource)
        assert Path(resource.config_path) == path / "config" / "rocky.toml"  # relative to defs.yaml
        result = dg.materialize(
            [defs.resolve_assets_def(ORDERS)],
            selection=[ORDERS],  # the resource is bound by the component
        )
        assert result.success
        assert [e.asset_key for e in result.get_asset_materialization_events()] == [ORDERS]


def test_discover_output_is_cached_as_component_state(sandbox: Any, playground: Path) -> None:
    attributes = {"config_path": "config/rocky.toml", "pipeline": "raw"}
    path = _component_dir(sandbox, attributes, project=playground)
    with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
        first = {s.key for s in defs.resolve_all_asset_specs()}
    assert FCT_ORDERS in first and ORDERS in first  # models (rocky dag) and tables (rocky discover)
    # The engine is no longer reachable, yet the code location loads: from the cached discover document.
    (path / "defs.yaml").write_text(
        yaml.safe_dump(
            {
                "type": "dagster_rocky.RockyComponent",
                "attributes": {**attributes, "binary_path": "/nowhere/rocky"},
            }
        )
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
        assert {s.key for s in defs.resolve_all_asset_specs()} == first


def test_translation_from_yaml(sandbox: Any, playground: Path) -> None:
    path = _component_dir(
        sandbox,
        {
            "config_path": "config/rocky.toml",
            "pipeline": "raw",
            "enable_sensor": True,
            "translation": {
                "group_name": "replicated_{{ source.components.source }}",
                "key_prefix": "warehouse",
                "tags": {"owner": "data"},
            },
        },
        project=playground,
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
        specs = {s.key: s for s in defs.resolve_all_asset_specs()}
        key = dg.AssetKey(["warehouse", "duckdb", "orders", "orders"])
        assert key in specs
        assert specs[key].group_name == "replicated_orders"
        assert specs[key].tags["owner"] == "data"
        assert specs[key].tags["rocky/source_type"] == "duckdb"
        # the sensor uses the same translation, so its requests name these keys
        translator = component.build_translator()
        source = next(s for s in component.build_resource().discover("raw").sources if s.id == "raw__orders")
        assert key in translator.keys_by_table(source)


def test_tenant_component_collapses_tenants_into_partitions(sandbox: Any, fivetran_project: Path) -> None:
    path = _component_dir(
        sandbox,
        {
            "config_path": str(fivetran_project),
            "tenant": "tenant",
            "enable_sensor": True,
        },
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
        specs = {s.key: s for s in defs.resolve_all_asset_specs()}
        assert set(specs) == {
            dg.AssetKey(["fivetran", "shopify", "orders"]),
            dg.AssetKey(["fivetran", "shopify", "customers"]),
            dg.AssetKey(["fivetran", "stripe", "charges"]),
        }
        partitions = specs[dg.AssetKey(["fivetran", "shopify", "orders"])].partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        assert partitions.name == "rocky_tenant"
        sensor = defs.resolve_sensor_def("fivetran_project_rocky_source_sensor")
        instance = dg.DagsterInstance.ephemeral()
        with dg.build_sensor_context(instance=instance, resources={"rocky": defs.resources["rocky"]}) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        (add,) = result.dynamic_partitions_requests or []
        assert sorted(add.partition_keys) == ["acme", "globex"]
        assert {r.partition_key for r in result.run_requests or []} == {"acme", "globex"}


def test_bad_attribute_is_rejected(sandbox: Any) -> None:
    path = _component_dir(sandbox, {"config_path": "rocky.toml", "sensor_granularity": "per_table"})
    with pytest.raises(Exception) as err, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    chain: list[str] = []
    exc: BaseException | None = err.value
    while exc is not None:
        chain.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    assert any("per_table" in text for text in chain), chain


class TaggingTranslator(RockyDagsterTranslator):
    """A translator named by ``translator_class`` in defs.yaml (importable from this test module)."""

    def get_tags(self, source: SourceInfo, table: TableInfo) -> dict[str, str]:
        return {**super().get_tags(source, table), "table": table.name}

    def get_dag_group_name(self, node: DagNode) -> str:
        return "models"


def test_translator_class_and_state_namespace_from_yaml(sandbox: Any, playground: Path) -> None:
    path = _component_dir(
        sandbox,
        {
            "config_path": "config/rocky.toml",
            "pipeline": "raw",
            "translator_class": f"{__name__}.TaggingTranslator",
            "state_namespace": "dagster",
        },
        project=playground,
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
        specs = {s.key: s for s in defs.resolve_all_asset_specs()}
        assert specs[ORDERS].tags["table"] == "orders"  # get_tags(source, table): the published signature
        assert specs[FCT_ORDERS].group_name == "models"
        rocky = defs.resources["rocky"]
        assert rocky.state_namespace == "dagster"
        command = rocky.command(rocky.run_args(pipeline="raw"))
        assert command[command.index("--state-namespace") + 1] == "dagster"
        assert "--state-path" not in command
        assert command[command.index("--wait-for-lock") + 1] == "600"


def test_translator_class_must_be_a_translator(sandbox: Any, playground: Path) -> None:
    path = _component_dir(
        sandbox, {"config_path": "config/rocky.toml", "translator_class": "pathlib.Path"}, project=playground
    )
    with pytest.raises(Exception) as err, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    chain: list[str] = []
    exc: BaseException | None = err.value
    while exc is not None:
        chain.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    assert any("'pathlib.Path' is not a RockyDagsterTranslator subclass" in text for text in chain), chain
