"""Warehouse adapters behind one protocol (DuckDB embedded, PostgreSQL server) and discovery adapters.

Each adapter type is a folder (``duckdb/``, ``postgres/``, ``fivetran/``) registered in ``registry``;
``base`` is the connection protocol, ``dialect`` the SQL every warehouse speaks its own way, ``retry`` and
``breaker`` the failure policy around every statement. ``docs/adapters.md`` explains how to add one.
"""

from __future__ import annotations

from rocky_engine.adapters.base import Column, TableName, WarehouseAdapter, WarehouseSession
from rocky_engine.adapters.registry import open_adapter

__all__ = ["Column", "TableName", "WarehouseAdapter", "WarehouseSession", "open_adapter"]
