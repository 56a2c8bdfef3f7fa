"""Fixtures for child connector tests: a connector project in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.connectors.kit import ConnectorProject
from tests.engine.connectors.toolchain import duckdb_pg_toolchain

__all__ = ["cp", "duckdb_pg_toolchain"]


@pytest.fixture
def cp(tmp_path: Path) -> ConnectorProject:
    """A connector project (call ``cp.setup(mode, ...)`` to write its config, manifest and program)."""
    return ConnectorProject(tmp_path)
