"""The ``duckdb`` adapter type: a database file (or memory) opened in-process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.adapters.duckdb.dialect import DIALECT
from rocky_engine.adapters.plugin import AdapterPlugin, CiSource, Health
from rocky_engine.config.adapters import DuckDbAdapterConfig

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseAdapter
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.config import RockyConfig


class DuckDbPlugin(AdapterPlugin):
    type = "duckdb"
    # A file locked by another process will not unlock within a retry's backoff: fail at once.
    retry_open = False

    @property
    def dialect(self) -> Dialect:
        return DIALECT

    def open(self, config: RockyConfig, name: str, *, read_only: bool = False) -> WarehouseAdapter:
        from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter

        return DuckDbAdapter(name, _path(config, name), read_only=read_only)

    def same_database(self, config: RockyConfig, first: str, second: str) -> bool:
        a, b = _path(config, first), _path(config, second)
        # Two in-memory adapters are two separate databases.
        return a is not None and b is not None and a.resolve() == b.resolve()

    def reachable(self, config: RockyConfig, name: str) -> Health:
        """Open the file read-only, so doctor never takes the writer's lock from a run; a file held by a
        running writer is a Warning (it is in use, not broken)."""
        path = _path(config, name)
        if path is None:
            return "healthy", f"{name}: in-memory DuckDB"
        if not path.exists():
            parent = path.parent
            if parent.is_dir() and os.access(parent, os.W_OK):
                return "healthy", f"{name}: {path} does not exist yet; the first run creates it"
            return "critical", f"{name}: {path} does not exist and {parent} is not a writable directory"
        import duckdb

        try:
            con = duckdb.connect(str(path), read_only=True)
        except duckdb.Error as exc:
            text = str(exc)
            if "lock" in text.lower():
                return "warning", f"{name}: {path} is locked by another process (a run in progress?)"
            return "critical", f"{name}: cannot open {path}: {text.splitlines()[0] if text else exc}"
        try:
            con.execute("SELECT 1").fetchall()
        except duckdb.Error as exc:
            return "critical", f"{name}: {path} opened but cannot be queried: {exc}"
        finally:
            con.close()
        return "healthy", f"{name}: {path} opens (DuckDB)"

    def ci_source(self, config: RockyConfig, name: str) -> CiSource:
        return CiSource(catalog=_config(config, name).catalog, attach=_path(config, name), exact=True)


def _config(config: RockyConfig, name: str) -> DuckDbAdapterConfig:
    cfg = config.adapter(name)
    assert isinstance(cfg, DuckDbAdapterConfig), f"adapter {name} is not a duckdb adapter"
    return cfg


def _path(config: RockyConfig, name: str) -> Path | None:
    return _config(config, name).resolved_path(config.root)


PLUGIN = DuckDbPlugin()
