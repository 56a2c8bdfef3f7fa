"""Open the warehouse adapter a pipeline names, importing only the driver it needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.config import RockyConfig


def open_adapter(config: RockyConfig, name: str, *, read_only: bool = False) -> WarehouseAdapter:
    """Connect to the adapter ``[adapter.<name>]``.

    Raises:
        ConfigError: the adapter is not configured or is not a warehouse (e.g. a discovery adapter).
        AdapterError: the warehouse cannot be reached.
    """
    adapter_cfg = config.adapter(name)
    if adapter_cfg.type == "duckdb":
        from rocky_engine.adapters.duckdb_adapter import DuckDbAdapter

        return DuckDbAdapter(name, adapter_cfg.resolved_path(config.root), read_only=read_only)
    if adapter_cfg.type == "postgres":
        from rocky_engine.adapters.postgres_adapter import PostgresAdapter

        return PostgresAdapter.connect(name, adapter_cfg)
    raise ConfigError(
        f"adapter '{name}' has type '{adapter_cfg.type}', which is not a warehouse",
        file=config.path,
        key=f"adapter.{name}.type",
        hint="point the pipeline at a duckdb or postgres adapter",
    )
