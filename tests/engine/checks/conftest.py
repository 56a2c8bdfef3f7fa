"""A real DuckDB warehouse (``wh.duckdb``, catalog ``wh``) with a small orders / customers schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter

SEED = [
    "CREATE SCHEMA shop",
    "CREATE TABLE shop.customers (id INTEGER, name VARCHAR)",
    "INSERT INTO shop.customers VALUES (1, 'ada'), (2, 'bob'), (3, 'cy')",
    "CREATE TABLE shop.orders (id INTEGER, customer_id INTEGER, status VARCHAR, amount DECIMAL(10,2), "
    "email VARCHAR, created_at TIMESTAMP, region VARCHAR)",
    "INSERT INTO shop.orders VALUES "
    "(1, 1, 'paid', 10.00, 'a@x.io', '2026-03-01 11:00:00', 'eu'), "
    "(2, 2, 'paid', 20.00, 'b@x.io', '2026-02-28 12:00:00', 'eu'), "
    "(3, 3, 'open', 30.00, 'c@x.io', '2026-02-27 12:00:00', 'us'), "
    "(4, 1, 'void', 40.00, 'd@x.io', '2026-01-01 00:00:00', 'us')",
]


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[DuckDbAdapter]:
    adapter = DuckDbAdapter("default", tmp_path / "wh.duckdb")
    for statement in SEED:
        adapter.execute(statement)
    try:
        yield adapter
    finally:
        adapter.close()
