"""Open the warehouse adapter a pipeline names, importing only the driver it needs.

Every adapter comes back wrapped in ``RetryingAdapter`` (``[adapter.NAME.retry]``): its statements are
retried on transient and connection failures and share one circuit breaker for the run. Opening a
PostgreSQL connection is retried the same way (a server restarting is a connection failure, not a
verdict); opening a DuckDB file is not, since a lock held by another process will not go away in seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.config import RockyConfig


def open_adapter(
    config: RockyConfig, name: str, *, read_only: bool = False, retry: bool = True
) -> WarehouseAdapter:
    """Connect to the adapter ``[adapter.<name>]``; ``retry=False`` returns the bare driver adapter.

    Raises:
        ConfigError: the adapter is not configured or is not a warehouse (e.g. a discovery adapter).
        AdapterError: the warehouse cannot be reached.
    """
    from rocky_engine.config.adapters import DuckDbAdapterConfig, PostgresAdapterConfig

    adapter_cfg = config.adapter(name)
    if not isinstance(adapter_cfg, DuckDbAdapterConfig | PostgresAdapterConfig):
        raise ConfigError(
            f"adapter '{name}' has type '{adapter_cfg.type}', which is not a warehouse",
            file=config.path,
            key=f"adapter.{name}.type",
            hint="point the pipeline at a duckdb or postgres adapter",
        )
    from rocky_engine.run.retry import CircuitBreaker, RetryingAdapter, StatementRetrier

    breaker = CircuitBreaker.for_adapter(name, adapter_cfg.retry)
    inner: WarehouseAdapter
    if isinstance(adapter_cfg, DuckDbAdapterConfig):
        from rocky_engine.adapters.duckdb_adapter import DuckDbAdapter

        inner = DuckDbAdapter(name, adapter_cfg.resolved_path(config.root), read_only=read_only)
    else:
        from rocky_engine.adapters.postgres_adapter import PostgresAdapter

        pg_cfg = adapter_cfg
        if not retry:
            return PostgresAdapter.connect(name, pg_cfg)
        inner = StatementRetrier(adapter_cfg.retry, breaker).call(
            lambda: PostgresAdapter.connect(name, pg_cfg), "connect"
        )
    if not retry:
        return inner
    return RetryingAdapter(inner, adapter_cfg.retry, breaker=breaker)
