"""The translator's published-API surface and the model specs it builds from a real ``rocky dag`` document."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import pytest

from dagster_rocky import RockyDagsterTranslator, build_rocky_assets
from dagster_rocky.models import build_model_index, model_selection, specs_from_dag
from dagster_rocky.types import DagNode, DagResult, DiscoverResult, SourceInfo, TableInfo

VARIADIC = DiscoverResult.model_validate(
    {
        "sources": [
            {
                "id": "src__eu__fr__shop",
                "components": {"regions": ["eu", "fr"], "connector": "shop"},
                "source_type": "fivetran",
                "tables": [{"name": "orders", "row_count": 3}],
                "metadata": {"fivetran.service": "shopify", "fivetran.schedule": {"every_minutes": 60}},
            }
        ]
    }
)
ORDERS = dg.AssetKey(["fivetran", "eu__fr", "shop", "orders"])


def test_list_components_are_one_value_in_key_group_and_tags() -> None:
    (spec,) = build_rocky_assets(VARIADIC)[0].specs
    assert spec.key == ORDERS
    assert spec.group_name == "eu__fr"  # the first component, joined like the key
    assert spec.tags["rocky/regions"] == "eu__fr"
    assert spec.tags["rocky/connector"] == "shop"


def test_source_metadata_is_forwarded_into_asset_metadata() -> None:
    (spec,) = build_rocky_assets(VARIADIC)[0].specs
    assert spec.metadata["fivetran.service"] == "shopify"
    assert spec.metadata["fivetran.schedule"] == dg.MetadataValue.json({"every_minutes": 60})
    assert spec.metadata["rocky/source_id"] == "src__eu__fr__shop"


class PerTableTags(RockyDagsterTranslator):
    """Written against the published dagster-rocky: get_tags takes the table."""

    def get_tags(self, source: SourceInfo, table: TableInfo) -> dict[str, str]:
        return {"table": table.name, "service": str(source.metadata["fivetran.service"])}


def test_a_published_style_get_tags_override_is_used_per_table() -> None:
    (assets,) = build_rocky_assets(VARIADIC, translator=PerTableTags())
    (spec,) = assets.specs
    assert {k: v for k, v in spec.tags.items() if not k.startswith("dagster/")} == {
        "table": "orders",
        "service": "shopify",
    }


def test_no_check_spec_without_dag_except_the_freshness_discover_reports() -> None:
    assert [c for a in build_rocky_assets(VARIADIC) for c in a.check_keys] == []
    with_freshness = VARIADIC.model_copy(
        update={"checks": {"freshness": {"threshold_seconds": 60}}}, deep=True
    )
    checked = DiscoverResult.model_validate(with_freshness.model_dump())
    assert [c.name for a in build_rocky_assets(checked) for c in a.check_keys] == ["freshness"]


@pytest.fixture
def dag(playground_dag: DagResult) -> DagResult:
    return playground_dag


def test_model_specs_from_rocky_dag(dag: DagResult) -> None:
    specs = {s.key: s for s in specs_from_dag(dag)}
    assert len(specs) == 9
    fct = specs[dg.AssetKey(["playground", "marts", "fct_orders"])]
    assert fct.group_name == "marts"
    assert fct.description == "One row per order."
    assert fct.owners == ["ana@example.com", "team:finance"]
    assert fct.tags["domain"] == "finance"
    assert fct.tags["rocky/model"] == "fct_orders"
    assert fct.kinds == {"rocky", "duckdb"}
    node = next(n for n in dag.nodes if n.label == "fct_orders")
    assert fct.code_version == node.sql_hash and fct.code_version
    assert fct.skippable
    assert [d.asset_key for d in fct.deps] == [
        dg.AssetKey(["playground", "intermediate", "int_order_payments"])
    ]
    stg = specs[dg.AssetKey(["playground", "staging", "stg_orders"])]
    # a model reading a replicated table depends on the replication asset's key
    assert [d.asset_key for d in stg.deps] == [dg.AssetKey(["duckdb", "orders", "orders"])]
    assert stg.freshness_policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=86400))
    assert stg.description  # the SQL file's leading comment, or the engine's line naming the model


class Prefixed(RockyDagsterTranslator):
    def get_asset_key(self, source: SourceInfo, table: TableInfo) -> dg.AssetKey:
        return dg.AssetKey(["raw", table.name])

    def get_dag_node_asset_key(self, node: DagNode) -> dg.AssetKey:
        if node.kind == "transformation":
            return dg.AssetKey(["models", node.label])
        return super().get_dag_node_asset_key(node)


def test_translated_keys_carry_into_model_deps(dag: DagResult) -> None:
    index = build_model_index(dag, Prefixed())
    stg = index.specs[dg.AssetKey(["models", "stg_orders"])]
    assert [d.asset_key for d in stg.deps] == [dg.AssetKey(["raw", "orders"])]
    # engine keys (what run events name) resolve to the translated keys
    assert index.by_engine_key[("playground", "staging", "stg_orders")] == dg.AssetKey(
        ["models", "stg_orders"]
    )


def test_model_selection_is_one_list_or_the_whole_pipeline() -> None:
    models = [("a", dg.AssetKey("a")), ("b", dg.AssetKey("b")), ("c", dg.AssetKey("c"))]
    assert model_selection(models, {dg.AssetKey("a"), dg.AssetKey("c")}) == ["a", "c"]
    assert model_selection(models, {dg.AssetKey(k) for k in "abc"}) is None
    assert model_selection(models, set()) == []
