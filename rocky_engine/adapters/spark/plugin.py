"""The ``spark`` adapter type: a Spark Connect endpoint (local server, cluster, Databricks Connect).

Without a connection the plugin knows the capability level only as the config declares it
(``table_format``; undeclared: Parquet, the weakest); ``open`` probes the real one and refuses a server
that disagrees with a declared level. ``rocky doctor`` connects: ``adapters`` says whether the endpoint
answers and at which capability level, ``auth`` whether the token was accepted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.adapters.plugin import AdapterPlugin, CiSource, Health
from rocky_engine.adapters.spark.capabilities import TRANSACTIONAL_FORMATS
from rocky_engine.adapters.spark.dialect import SparkDialect
from rocky_engine.config.adapters import SparkAdapterConfig
from rocky_engine.errors import AdapterError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.adapters.spark.adapter import SparkAdapter
    from rocky_engine.adapters.spark.options import SparkConnectOptions
    from rocky_engine.config import RockyConfig

#: the dialect of an adapter that declares no table_format: the Parquet level (no MERGE)
_FILE_LEVEL = SparkDialect("parquet", merge=False)


class SparkPlugin(AdapterPlugin):
    type = "spark"
    default_schema = "default"
    # A cluster starting up or a restarting server answers UNAVAILABLE: worth the retry policy.
    retry_open = True

    @property
    def dialect(self) -> SparkDialect:
        return _FILE_LEVEL

    def declared_dialect(self, config: RockyConfig, name: str) -> SparkDialect:
        """The dialect of the level ``[adapter.<name>] table_format`` declares (Parquet if undeclared)."""
        fmt = (_config(config, name).table_format or "parquet").lower()
        return SparkDialect(fmt, merge=fmt in TRANSACTIONAL_FORMATS)

    def open(self, config: RockyConfig, name: str, *, read_only: bool = False) -> WarehouseAdapter:
        return self._connect(config, name)

    def _connect(self, config: RockyConfig, name: str) -> SparkAdapter:
        from rocky_engine.adapters.spark.adapter import SparkAdapter

        cfg = _config(config, name)
        staging = cfg.staging_dir.expanduser() if cfg.staging_dir is not None else None
        if staging is not None and not staging.is_absolute():
            staging = config.root / staging  # sparkrepl: relative to the project, like a DuckDB path
        return SparkAdapter.connect(name, options(cfg, name), cfg.catalog, expected_format=cfg.table_format,
                                    staging_dir=staging)

    def same_database(self, config: RockyConfig, first: str, second: str) -> bool:
        a, b = _config(config, first), _config(config, second)
        return a.remote == b.remote and a.cluster_id == b.cluster_id and a.catalog == b.catalog

    def reachable(self, config: RockyConfig, name: str) -> Health:
        try:
            adapter = self._connect(config, name)
        except ImportError:
            return "critical", f"{name}: pyspark is not installed (pip install 'rocky[spark]')"
        except AdapterError as exc:
            return "critical", f"{name}: {exc.message} ({exc.failure_kind})"
        try:
            caps = adapter.capability_level
            where = adapter.connection.where
            return "healthy", (
                f"{name}: Spark {caps.spark_version} at {where} answers; capability level: "
                f"{adapter.spark_dialect.level}"
            )
        finally:
            adapter.close()

    def authenticated(self, config: RockyConfig, name: str) -> Health | None:
        cfg = _config(config, name)
        if cfg.token is None and ";token=" not in cfg.remote:
            return None  # nothing to authenticate with: `adapters` already says whether it answers
        try:
            adapter = self._connect(config, name)
        except ImportError:
            return "critical", f"{name}: pyspark is not installed (pip install 'rocky[spark]')"
        except AdapterError as exc:
            return "critical", f"{name}: {exc.message} ({exc.failure_kind})"
        adapter.close()
        return "healthy", f"{name}: the Spark Connect token was accepted"

    def ci_source(self, config: RockyConfig, name: str) -> CiSource:
        return CiSource(catalog=_config(config, name).catalog)


def options(cfg: SparkAdapterConfig, name: str) -> SparkConnectOptions:
    """The connection layer's options of ``[adapter.<name>]`` (the token leaves SecretStr only here)."""
    from rocky_engine.adapters.spark.options import SparkConnectOptions

    return SparkConnectOptions(
        remote=cfg.remote,
        token=cfg.token.get_secret_value() if cfg.token is not None else None,
        cluster_id=cfg.cluster_id,
        session_id=cfg.session_id,
        headers=tuple(sorted(cfg.headers.items())),
        adapter=name,
    )


def _config(config: RockyConfig, name: str) -> SparkAdapterConfig:
    cfg = config.adapter(name)
    assert isinstance(cfg, SparkAdapterConfig), f"adapter {name} is not a spark adapter"
    return cfg


PLUGIN = SparkPlugin()
