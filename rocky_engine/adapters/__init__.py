"""Warehouse adapters behind one protocol (DuckDB embedded, PostgreSQL server) and discovery adapters."""

from __future__ import annotations

from rocky_engine.adapters.base import Column, WarehouseAdapter, WarehouseSession
from rocky_engine.adapters.registry import open_adapter

__all__ = ["Column", "WarehouseAdapter", "WarehouseSession", "open_adapter"]
