"""load_rocky_assets and the multi-asset factory against the real playground and the real engine."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from dagster_rocky import RockyDagsterTranslator, RockyResource, build_rocky_assets, load_rocky_assets
from dagster_rocky.assets import build_index
from dagster_rocky.execution import choose_filters
from dagster_rocky.types import DiscoverResult, SourceInfo

CHECKS = """
[pipeline.raw.checks]
row_count = true
column_match = true
freshness = { threshold_seconds = 86400 }
"""

ORDERS = dg.AssetKey(["duckdb", "orders", "orders"])
CUSTOMERS = dg.AssetKey(["duckdb", "orders", "customers"])
PAYMENTS = dg.AssetKey(["duckdb", "payments", "payments"])


@pytest.fixture
def checked(playground: Path) -> Path:
    """The playground with row_count / column_match / freshness checks on its replication pipeline."""
    config = playground / "rocky.toml"
    config.write_text(config.read_text() + CHECKS)
    return config


def _events(
    result: dg.ExecuteInProcessResult,
) -> tuple[dict[dg.AssetKey, dict], list[dg.AssetCheckEvaluation]]:
    """Materialization metadata by key (raw values) and every check evaluation, from a finished run."""
    mats: dict[dg.AssetKey, dict] = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        assert mat.asset_key not in mats, f"two materializations for {mat.asset_key}"
        mats[mat.asset_key] = {k: v.value for k, v in mat.metadata.items()}
    return mats, list(result.get_asset_check_evaluations())


def test_load_rocky_assets_one_spec_per_table(checked: Path) -> None:
    specs = load_rocky_assets(RockyResource(config_path=str(checked)))
    by_key = {s.key: s for s in specs}
    assert {k for k in by_key if k.path[0] == "duckdb"} == {ORDERS, CUSTOMERS, PAYMENTS}
    # and one spec per model, from `rocky dag`, reading the replication assets
    assert len([k for k in by_key if k.path[0] == "playground"]) == 9
    stg = by_key[dg.AssetKey(["playground", "staging", "stg_orders"])]
    assert [d.asset_key for d in stg.deps] == [ORDERS]
    orders = by_key[ORDERS]
    assert orders.group_name == "orders"
    assert orders.tags["rocky/source_type"] == "duckdb"
    assert orders.tags["rocky/source"] == "orders"
    assert orders.metadata["rocky/source_id"] == "raw__orders"
    assert orders.metadata["rocky/row_count"] == 20000
    assert orders.freshness_policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=86400))
    assert "rocky" in orders.kinds


def test_no_freshness_policy_without_the_check(playground: Path) -> None:
    specs = load_rocky_assets(RockyResource(config_path=str(playground / "rocky.toml")), models=False)
    assert len(specs) == 3
    assert all(s.freshness_policy is None for s in specs)


@pytest.mark.slow
def test_factory_materializes_every_table_with_checks(checked: Path) -> None:
    rocky = RockyResource(config_path=str(checked))
    assets = build_rocky_assets(rocky, pipeline="raw")
    assert sorted(a.node_def.name for a in assets) == ["rocky_orders", "rocky_payments"]
    # the configured checks (rocky dag), the anomaly detector as row_count_anomaly
    assert {c.name for a in assets for c in a.check_keys} == {
        "row_count",
        "column_match",
        "freshness",
        "row_count_anomaly",
    }
    result = dg.materialize(assets, resources={"rocky": rocky})
    assert result.success
    mats, checks = _events(result)
    assert set(mats) == {ORDERS, CUSTOMERS, PAYMENTS}
    orders = mats[ORDERS]
    assert orders["dagster/row_count"] == 20000  # rows in the target after the run
    assert orders["rocky/rows_copied"] == 20000
    assert isinstance(orders["dagster/duration_ms"], int)
    # streamed: the event carries the document's materialization (target, watermark, column count)
    assert orders["target_table_full_name"] == "playground.staging__orders.orders"
    assert str(orders["rocky/run_id"]).startswith("run-")
    assert orders["rocky/finished_at"] > 0
    by_check = {(c.asset_key, c.check_name): c for c in checks}
    # three tables x three checks, never two for one key; the anomaly check is declared but no anomaly
    # was evaluated (too little history), so it has no result at all: no placeholder "passed"
    assert len(by_check) == len(checks) == 9
    assert (ORDERS, "row_count_anomaly") not in by_check
    assert not any("rocky/placeholder" in c.metadata for c in checks)
    row_count = by_check[(ORDERS, "row_count")]
    assert row_count.passed
    # streamed check results carry the engine's measured details, as the document names them
    assert row_count.metadata["source_count"].value == row_count.metadata["target_count"].value == 20000
    assert by_check[(PAYMENTS, "column_match")].passed
    freshness = by_check[(PAYMENTS, "freshness")]
    assert not freshness.passed  # the seed data is older than a day
    assert freshness.severity == dg.AssetCheckSeverity.WARN
    assert freshness.metadata["threshold_seconds"].value == 86400


@pytest.mark.slow
def test_subset_runs_and_reports_only_the_selection(checked: Path) -> None:
    rocky = RockyResource(config_path=str(checked))
    assets = build_rocky_assets(rocky, pipeline="raw")
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        assets,
        selection=dg.AssetSelection.assets(ORDERS).without_checks()
        | dg.AssetSelection.checks(dg.AssetCheckKey(ORDERS, "row_count")),
        resources={"rocky": rocky},
        instance=instance,
    )
    assert result.success
    mats, checks = _events(result)
    assert set(mats) == {ORDERS}
    assert [(c.asset_key, c.check_name) for c in checks] == [(ORDERS, "row_count")]
    # `table=orders` ran just that table: customers was never copied
    engine_runs = rocky.history().runs
    assert len(engine_runs) == 1
    con = duckdb.connect(str(checked.parent / "playground.duckdb"), read_only=True)
    try:
        tables = {
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema = 'staging__orders'"
            ).fetchall()
        }
    finally:
        con.close()
    assert tables == {"orders"}


@pytest.mark.slow
def test_failed_table_gets_no_materialization_and_fails_the_step(checked: Path) -> None:
    con = duckdb.connect(str(checked.parent / "playground.duckdb"))
    con.execute("create table raw__orders.broken as select 1 as id")  # no _fivetran_synced: cannot be copied
    con.close()
    rocky = RockyResource(config_path=str(checked))
    assets = build_rocky_assets(rocky, pipeline="raw")
    broken = dg.AssetKey(["duckdb", "orders", "broken"])
    result = dg.materialize(assets, resources={"rocky": rocky}, raise_on_error=False)
    assert not result.success
    mats, checks = _events(result)
    assert set(mats) == {ORDERS, CUSTOMERS, PAYMENTS}
    assert broken not in mats
    assert not any(c.asset_key == broken for c in checks)
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert [f.step_key for f in failures] == ["rocky_orders"]
    error = failures[0].event_specific_data.error
    assert error is not None
    assert "duckdb/orders/broken (query-rejected): timestamp column '_fivetran_synced'" in error.message


def test_no_check_is_declared_or_reported_that_the_project_does_not_configure(playground: Path) -> None:
    # No [pipeline.raw.checks]: no check specs at all, so nothing can show as passed without running.
    rocky = RockyResource(config_path=str(playground / "rocky.toml"))
    assets = build_rocky_assets(rocky, pipeline="raw")
    assert [c for a in assets for c in a.check_keys] == []
    result = dg.materialize(assets, resources={"rocky": rocky})
    assert result.success
    _, checks = _events(result)
    assert checks == []


def test_pipeline_comes_from_discover_when_the_project_has_several(playground: Path) -> None:
    """discover names each source's pipeline (metadata.pipeline), so no `pipeline=` is needed."""
    rocky = RockyResource(config_path=str(playground / "rocky.toml"))
    assets = build_rocky_assets(rocky)
    result = dg.materialize(assets, resources={"rocky": rocky})
    assert result.success
    mats, _ = _events(result)
    assert {k.path[-1] for k in mats} == {"orders", "customers", "payments"}


class PrefixTranslator(RockyDagsterTranslator):
    def get_asset_key(self, source: SourceInfo, table: object) -> dg.AssetKey:  # type: ignore[override]
        return dg.AssetKey(["warehouse", "raw", table.name])  # type: ignore[attr-defined]

    def get_group_name(self, source: SourceInfo) -> str:
        return "replicated"


def test_custom_translator_keys_map_engine_results(playground: Path) -> None:
    rocky = RockyResource(config_path=str(playground / "rocky.toml"))
    (group,) = build_rocky_assets(rocky, translator=PrefixTranslator(), pipeline="raw")
    assert group.node_def.name == "rocky_replicated"
    result = dg.materialize([group], resources={"rocky": rocky})
    mats, _ = _events(result)
    assert set(mats) == {dg.AssetKey(["warehouse", "raw", n]) for n in ("orders", "customers", "payments")}


def test_duplicate_keys_are_refused_outside_tenant_mode() -> None:
    discover = DiscoverResult.model_validate(
        {
            "sources": [
                {"id": "a", "components": {"tenant": "x"}, "source_type": "t", "tables": [{"name": "o"}]},
                {"id": "b", "components": {"tenant": "y"}, "source_type": "t", "tables": [{"name": "o"}]},
            ]
        }
    )

    class Flat(RockyDagsterTranslator):
        def get_asset_key(self, source: SourceInfo, table: object) -> dg.AssetKey:  # type: ignore[override]
            return dg.AssetKey(["o"])

    with pytest.raises(dg.DagsterInvalidDefinitionError, match="sources 'a' and 'b' both map table 'o'"):
        build_index(discover, Flat())


def test_filter_choice() -> None:
    discover = DiscoverResult.model_validate(
        {
            "sources": [
                {
                    "id": "s1",
                    "components": {"tenant": "acme", "c": "shop"},
                    "source_type": "f",
                    "tables": [{"name": "orders"}, {"name": "items"}],
                },
                {
                    "id": "s2",
                    "components": {"tenant": "acme", "c": "pay"},
                    "source_type": "f",
                    "tables": [{"name": "charges"}, {"name": "orders"}],
                },
                {
                    "id": "s3",
                    "components": {"tenant": "globex", "c": "shop"},
                    "source_type": "f",
                    "tables": [{"name": "orders"}],
                },
            ]
        }
    )
    index = build_index(discover)
    entries = index.entries
    acme = [e for e in entries if e.source.components["tenant"] == "acme"]
    assert choose_filters(acme, index) == ["tenant=acme"]
    assert choose_filters([e for e in entries if e.source.id == "s1"], index) == ["id=s1"]
    assert choose_filters([e for e in entries if e.table.name == "items"], index) == ["table=items"]
    # 'orders' exists in several sources: a table= filter would run them all
    assert choose_filters(
        [e for e in entries if e.source.id == "s1" and e.table.name == "orders"], index
    ) == ["id=s1"]
    assert choose_filters([e for e in entries if e.source.id in ("s1", "s3")], index) == ["id=s1", "id=s3"]


def _seed_fivetran_warehouse(config: Path) -> None:
    """The tables the fake Fivetran connectors landed, in the project's DuckDB warehouse."""
    con = duckdb.connect(str(config.parent / "warehouse.duckdb"))
    try:
        for schema, tables in {
            "src__acme__shopify": ["orders", "customers"],
            "src__acme__stripe": ["charges"],
            "src__globex__shopify": ["orders"],
        }.items():
            con.execute(f"create schema {schema}")
            for table in tables:
                con.execute(f"create table {schema}.{table} as select range as id from range(7)")
    finally:
        con.close()


@pytest.mark.slow
def test_tenant_partitions_run_one_tenant(fivetran_project: Path) -> None:
    _seed_fivetran_warehouse(fivetran_project)
    rocky = RockyResource(config_path=str(fivetran_project))
    tenants = dg.DynamicPartitionsDefinition(name="tenants")
    assets = build_rocky_assets(rocky, pipeline="raw", tenant_component="tenant", partitions_def=tenants)
    shopify_orders = dg.AssetKey(["fivetran", "shopify", "orders"])
    # one group per connector (the tenant is the partition): shopify and stripe
    assert sorted(a.node_def.name for a in assets) == ["rocky_shopify", "rocky_stripe"]
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("tenants", ["acme", "globex"])
    result = dg.materialize(assets, partition_key="globex", resources={"rocky": rocky}, instance=instance)
    assert result.success
    mats, _ = _events(result)
    assert set(mats) == {shopify_orders}  # globex has only shopify orders
    assert mats[shopify_orders]["rows_copied"] == 7
    assert mats[shopify_orders]["dagster/row_count"] == 7
    (run,) = rocky.history().runs
    acme = dg.materialize(assets, partition_key="acme", resources={"rocky": rocky}, instance=instance)
    acme_mats, _ = _events(acme)
    assert set(acme_mats) == {
        shopify_orders,
        dg.AssetKey(["fivetran", "shopify", "customers"]),
        dg.AssetKey(["fivetran", "stripe", "charges"]),
    }
    assert len(rocky.history().runs) == 1 + 2  # acme: one run per group step
    assert run.run_id not in {r.run_id for r in rocky.history().runs[:2]}
