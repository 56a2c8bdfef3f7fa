"""The ``postgres`` adapter type: a PostgreSQL database on a server, reached with psycopg."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.adapters.plugin import AdapterPlugin, CiSource, Health
from rocky_engine.adapters.postgres.dialect import DIALECT
from rocky_engine.config.adapters import PostgresAdapterConfig
from rocky_engine.errors import AdapterError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.config import RockyConfig


class PostgresPlugin(AdapterPlugin):
    type = "postgres"
    default_schema = "public"
    # A server restarting (connection refused, "starting up") is worth the retry policy.
    retry_open = True

    @property
    def dialect(self) -> Dialect:
        return DIALECT

    def open(self, config: RockyConfig, name: str, *, read_only: bool = False) -> WarehouseAdapter:
        from rocky_engine.adapters.postgres.adapter import PostgresAdapter

        return PostgresAdapter.connect(name, _config(config, name))

    def reachable(self, config: RockyConfig, name: str) -> Health:
        return _query(config, name, "SELECT 1", "reachable")

    def authenticated(self, config: RockyConfig, name: str) -> Health | None:
        return _query(config, name, "SELECT current_user", "authenticated as")

    def ci_source(self, config: RockyConfig, name: str) -> CiSource:
        return CiSource(catalog=_config(config, name).catalog)


def _config(config: RockyConfig, name: str) -> PostgresAdapterConfig:
    cfg = config.adapter(name)
    assert isinstance(cfg, PostgresAdapterConfig), f"adapter {name} is not a postgres adapter"
    return cfg


def _query(config: RockyConfig, name: str, sql: str, ok_label: str) -> Health:
    """Connect once (a health check reports, it does not retry) and run ``sql``."""
    try:
        adapter = PLUGIN.open(config, name)
    except ImportError:
        return "critical", f"{name}: the PostgreSQL driver is not installed (pip install 'rocky[postgres]')"
    except AdapterError as exc:
        return "critical", f"{name}: {exc.message} ({exc.failure_kind})"
    try:
        rows = adapter.query(sql)
    except AdapterError as exc:
        return "critical", f"{name}: {exc.message} ({exc.failure_kind})"
    finally:
        adapter.close()
    detail = f" {rows[0][0]}" if ok_label == "authenticated as" and rows else ""
    return "healthy", f"{name}: {ok_label}{detail} (PostgreSQL)"


PLUGIN = PostgresPlugin()
