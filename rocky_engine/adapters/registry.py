"""The adapter types this engine knows, and opening the warehouse adapter a pipeline names.

A new warehouse is one folder ``adapters/<type>/`` with a ``plugin`` module (``PLUGIN``, see
``adapters.plugin``) plus one line in ``PLUGINS`` (and its ``[adapter]`` model in ``config/adapters.py``).

Every adapter comes back wrapped in ``RetryingAdapter`` (``[adapter.NAME.retry]``): its statements are
retried on transient and connection failures and share one circuit breaker for the run. Opening is
retried the same way when the plugin says so (``retry_open``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.adapters.plugin import AdapterPlugin
    from rocky_engine.config import RockyConfig

#: adapter type -> the module whose ``PLUGIN`` implements it
PLUGINS: dict[str, str] = {
    "duckdb": "rocky_engine.adapters.duckdb.plugin",
    "postgres": "rocky_engine.adapters.postgres.plugin",
    "spark": "rocky_engine.adapters.spark.plugin",
    "fivetran": "rocky_engine.adapters.fivetran.plugin",
}


def plugin(adapter_type: str) -> AdapterPlugin:
    """The plugin of an adapter type (config validation already refused unknown types)."""
    module = PLUGINS.get(adapter_type)
    if module is None:
        raise ConfigError(f"adapter type '{adapter_type}' is not implemented by this build",
                          hint=f"use one of: {', '.join(PLUGINS)}")
    found: AdapterPlugin = importlib.import_module(module).PLUGIN
    return found


def plugin_of(config: RockyConfig, name: str) -> AdapterPlugin:
    """The plugin of ``[adapter.<name>]``."""
    return plugin(config.adapter(name).type)


def dialect_of(config: RockyConfig, name: str) -> Dialect:
    """The dialect of warehouse adapter ``[adapter.<name>]``, without connecting: at the capability level
    its config declares (``AdapterPlugin.declared_dialect``).

    Raises:
        ConfigError: the adapter is not a warehouse.
    """
    found = plugin_of(config, name)
    declared = found.declared_dialect(config, name)
    if declared is None:
        found.open(config, name)  # raises the "not a warehouse" error
        raise AssertionError("a plugin without a dialect must refuse to open")
    return declared


def open_adapter(
    config: RockyConfig, name: str, *, read_only: bool = False, retry: bool = True
) -> WarehouseAdapter:
    """Connect to the adapter ``[adapter.<name>]``; ``retry=False`` returns the bare driver adapter.

    Raises:
        ConfigError: the adapter is not configured or is not a warehouse (e.g. a discovery adapter).
        AdapterError: the warehouse cannot be reached.
    """
    found = plugin_of(config, name)
    if not retry:
        return found.open(config, name, read_only=read_only)
    from rocky_engine.adapters.breaker import CircuitBreaker
    from rocky_engine.adapters.retry import RetryingAdapter, StatementRetrier

    retry_cfg = config.adapter(name).retry
    breaker = CircuitBreaker.for_adapter(name, retry_cfg)
    if found.retry_open:
        inner = StatementRetrier(retry_cfg, breaker).call(
            lambda: found.open(config, name, read_only=read_only), "connect"
        )
    else:
        inner = found.open(config, name, read_only=read_only)
    return RetryingAdapter(inner, retry_cfg, breaker=breaker)


def same_database(config: RockyConfig, first: str, second: str) -> bool:
    """Whether adapters ``first`` and ``second`` reach the same database (then copies are SQL only)."""
    if first == second:
        return True
    a, b = config.adapter(first), config.adapter(second)
    return a.type == b.type and plugin(a.type).same_database(config, first, second)
