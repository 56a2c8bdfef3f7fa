"""What the engine knows about one adapter type without a connection: one ``AdapterPlugin`` per folder.

``adapters/registry.py`` maps each ``[adapter.NAME] type`` to its folder's ``plugin`` module, whose
``PLUGIN`` answers every question a command asks before (or instead of) connecting: open a connection,
the dialect and its capabilities, whether two adapters reach one database, ``rocky doctor``'s checks,
discovery, and what ``rocky ci`` can build against. A plugin module imports no driver: ``rocky validate``
and a quiet ``rocky tick`` consult plugins without importing duckdb, psycopg or httpx.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.adapters.discovery import DiscoveryAdapter
    from rocky_engine.config import RockyConfig

HealthStatus = Literal["healthy", "warning", "critical"]
#: one line of ``rocky doctor``: the verdict and a message that never carries a secret
Health = tuple[HealthStatus, str]


@dataclass(frozen=True, slots=True)
class CiSource:
    """What ``rocky ci`` (which builds every model in an in-memory DuckDB) can use of a warehouse."""

    #: the warehouse's catalog name, so compiled references resolve as in a real run
    catalog: str
    #: a DuckDB database file to ATTACH read-only for the source tables; None: sources cannot be seen
    attach: Path | None = None
    #: whether a DuckDB build is the warehouse's own verdict (else dialect differences are advisory)
    exact: bool = False


class AdapterPlugin:
    """An adapter type. Warehouse plugins override ``open`` and ``dialect``; defaults describe neither."""

    #: the ``type`` of ``[adapter.NAME]``
    type: str = ""
    #: the schema a model without a ``[target] schema`` lands in (``rocky dag`` resolves it unconnected)
    default_schema: str = "main"
    #: pipelines and connectors can write to it (False: a discovery source only)
    warehouse: bool = True
    #: opening is retried with ``[adapter.NAME.retry]``: a server restarting is not a verdict, while a
    #: locked file will not unlock in seconds
    retry_open: bool = False

    @property
    def dialect(self) -> Dialect | None:
        """The warehouse's dialect (its capabilities included); None for a discovery-only adapter."""
        return None

    def declared_dialect(self, config: RockyConfig, name: str) -> Dialect | None:
        """The dialect at the capability level ``[adapter.<name>]`` declares, for commands that do not
        connect (``rocky validate``): ``dialect``, unless the server decides the level (Spark)."""
        return self.dialect

    def open(self, config: RockyConfig, name: str, *, read_only: bool = False) -> WarehouseAdapter:
        """Connect to ``[adapter.<name>]`` (no retry wrapper: ``registry.open_adapter`` adds it).

        Raises:
            ConfigError: the adapter is not a warehouse.
            AdapterError: the warehouse cannot be reached.
        """
        raise ConfigError(
            f"adapter '{name}' has type '{self.type}', which is not a warehouse",
            file=config.path,
            key=f"adapter.{name}.type",
            hint="point the pipeline at a warehouse adapter (duckdb or postgres)",
        )

    def same_database(self, config: RockyConfig, first: str, second: str) -> bool:
        """Whether two differently named adapters of this type reach one database (copies are then SQL)."""
        return False

    def reachable(self, config: RockyConfig, name: str) -> Health:
        """``rocky doctor``'s ``adapters`` check of this adapter."""
        return "healthy", f"{name}: {self.type} adapter"

    def authenticated(self, config: RockyConfig, name: str) -> Health | None:
        """``rocky doctor``'s ``auth`` check; None when the adapter has no credentials to check."""
        return None

    def discovery(self, config: RockyConfig, name: str) -> DiscoveryAdapter | None:
        """A discovery adapter of its own; None: the warehouse lists its schemas (``WarehouseDiscovery``)."""
        return None

    def ci_source(self, config: RockyConfig, name: str) -> CiSource:
        return CiSource(catalog="warehouse")
