"""The playground's transformation models as assets, with automation conditions.

The replication assets come from the Rocky component (``replication/defs.yaml``); these nine models read
the replicated tables, so they declare them as dependencies. Staging and intermediate models refresh
eagerly when their inputs update; the marts wait for a daily cron tick after their inputs updated.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at runtime.
from collections.abc import Iterator
from typing import Any

import dagster as dg

from dagster_rocky import RockyResource, rocky_cron_automation, rocky_eager_automation

CATALOG = "playground"


def _raw(source: str, table: str) -> dg.AssetKey:
    # the replication asset key: [source_type, source component, table]
    return dg.AssetKey(["duckdb", source, table])


def _model(schema: str, name: str) -> dg.AssetKey:
    # the engine's transformation asset key: [catalog, schema, table]
    return dg.AssetKey([CATALOG, schema, name])


# model name -> (schema, upstream keys), in dependency order
MODELS: dict[str, tuple[str, list[dg.AssetKey]]] = {
    "stg_customers": ("staging", [_raw("orders", "customers")]),
    "stg_orders": ("staging", [_raw("orders", "orders")]),
    "stg_payments": ("staging", [_raw("payments", "payments")]),
    "int_order_payments": (
        "intermediate",
        [_model("staging", "stg_orders"), _model("staging", "stg_payments")],
    ),
    "int_customer_orders": ("intermediate", [_model("intermediate", "int_order_payments")]),
    "dim_customers": (
        "marts",
        [_model("staging", "stg_customers"), _model("intermediate", "int_customer_orders")],
    ),
    "fct_orders": ("marts", [_model("intermediate", "int_order_payments")]),
    "fct_daily_revenue": ("marts", [_model("marts", "fct_orders")]),
    "top_customers": ("marts", [_model("marts", "dim_customers")]),
}

KEY_TO_MODEL = {_model(schema, name): name for name, (schema, _) in MODELS.items()}


def _condition(schema: str) -> dg.AutomationCondition:
    if schema == "marts":
        return rocky_cron_automation("0 7 * * *", "UTC")
    return rocky_eager_automation()


@dg.multi_asset(
    name="playground_models",
    specs=[
        dg.AssetSpec(
            _model(schema, name),
            deps=deps,
            group_name="models",
            kinds={"rocky", "duckdb"},
            tags={"layer": schema},
            automation_condition=_condition(schema),
            skippable=True,
        )
        for name, (schema, deps) in MODELS.items()
    ],
    can_subset=True,
)
def playground_models(context: dg.AssetExecutionContext, rocky: RockyResource) -> Iterator[Any]:
    """``rocky run --pipeline models``: everything at once, or the selected models one by one."""
    selected = context.selected_asset_keys
    if selected >= set(KEY_TO_MODEL):
        runs: list[str | None] = [None]
    else:
        runs = [name for name in MODELS if _model(MODELS[name][0], name) in selected]
    failed: list[str] = []
    for model in runs:
        result = rocky.run_streaming(context, pipeline="models", model=model)
        for mat in result.materializations:
            key = dg.AssetKey(mat.asset_key)
            if key in selected:
                metadata: dict[str, Any] = {
                    "dagster/duration_ms": mat.duration_ms,
                    "strategy": mat.metadata.strategy,
                }
                if mat.rows_copied is not None:
                    metadata["dagster/row_count"] = mat.rows_copied
                yield dg.MaterializeResult(asset_key=key, metadata=metadata)
        failed += [f"{'.'.join(e.asset_key)}: {e.error}" for e in result.errors]
    if failed:
        raise dg.Failure(description="rocky: model(s) failed: " + "; ".join(failed))
