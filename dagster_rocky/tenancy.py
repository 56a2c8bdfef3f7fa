"""Tenant mode: sources that differ only by a tenant component collapse into one partitioned asset.

With ``tenant_component="tenant"``, ``src__acme__shopify`` and ``src__globex__shopify`` both become the
asset ``[source_type, "shopify", table]`` with dynamic partitions ``acme`` and ``globex``. The asset
factory, the component and the sensor all use these helpers so their keys and partition keys agree.
"""

from __future__ import annotations

from dagster_rocky.translator import RockyDagsterTranslator, component_value, safe_name
from dagster_rocky.types import SourceInfo


def strip_tenant(source: SourceInfo, tenant_component: str | None) -> SourceInfo:
    """``source`` as the translator sees it in tenant mode: without the tenant component."""
    if not tenant_component or tenant_component not in source.components:
        return source
    components = {k: v for k, v in source.components.items() if k != tenant_component}
    return source.model_copy(update={"components": components})


def tenant_of(
    source: SourceInfo, tenant_component: str | None, translator: RockyDagsterTranslator
) -> str | None:
    """The partition key of ``source``: the translator's choice, else its tenant component value."""
    custom = translator.get_partition_key(source)
    if custom:
        return custom
    if not tenant_component:
        return None
    value = source.components.get(tenant_component)
    if value is None:
        return None
    text = component_value(value)
    return text or None


def default_partitions_name(tenant_component: str) -> str:
    """The dynamic partitions definition the component creates for ``tenant: <component>``."""
    return safe_name(f"rocky_{tenant_component}")
