"""The adapter registry: one plugin per adapter type, consulted without importing a driver, and the
answers commands ask of it before connecting."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocky_engine.adapters.registry import PLUGINS, dialect_of, open_adapter, plugin, same_database
from rocky_engine.config import load_config
from rocky_engine.config.adapters import ADAPTER_TYPES, WAREHOUSE_TYPES
from rocky_engine.errors import ConfigError


def test_every_configurable_adapter_type_has_a_plugin_and_no_other() -> None:
    assert set(PLUGINS) == set(ADAPTER_TYPES)
    for adapter_type in ADAPTER_TYPES:
        found = plugin(adapter_type)
        assert found.type == adapter_type
        assert found.warehouse is (adapter_type in WAREHOUSE_TYPES)
        assert (found.dialect is not None) is found.warehouse


def test_plugins_and_dialects_import_no_driver() -> None:
    # rocky validate and a quiet rocky tick consult plugins; they must stay free of the heavy drivers.
    code = textwrap.dedent("""
        import json, sys
        from rocky_engine.adapters.registry import PLUGINS, plugin
        for t in PLUGINS:
            p = plugin(t)
            if p.dialect is not None:
                p.dialect.capabilities
        heavy = [m for m in ("duckdb", "psycopg", "httpx", "pyarrow") if m in sys.modules]
        print(json.dumps(heavy))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rocky.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_same_database_is_decided_by_each_adapter_type(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, """
        [adapter.a]
        type = "duckdb"
        path = "wh.duckdb"

        [adapter.b]
        type = "duckdb"
        path = "./sub/../wh.duckdb"

        [adapter.c]
        type = "duckdb"
        path = "other.duckdb"

        [adapter.m1]
        type = "duckdb"

        [adapter.m2]
        type = "duckdb"

        [adapter.pg1]
        type = "postgres"
        dsn = "postgresql://u@127.0.0.1:1/db"

        [adapter.pg2]
        type = "postgres"
        dsn = "postgresql://u@127.0.0.1:1/db"
    """))
    assert same_database(config, "a", "b")
    assert not same_database(config, "a", "c")
    assert same_database(config, "m1", "m1")
    assert not same_database(config, "m1", "m2")  # two in-memory databases
    assert not same_database(config, "a", "pg1")
    # Two PostgreSQL adapters are copied through Arrow even when they name one database.
    assert not same_database(config, "pg1", "pg2")


def test_a_discovery_adapter_is_not_a_warehouse(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, """
        [adapter.ft]
        type = "fivetran"
        api_key = "k"
        api_secret = "s"
        destination_id = "d"
    """))
    with pytest.raises(ConfigError, match="adapter 'ft' has type 'fivetran', which is not a warehouse"):
        open_adapter(config, "ft")
    with pytest.raises(ConfigError, match="which is not a warehouse"):
        dialect_of(config, "ft")
