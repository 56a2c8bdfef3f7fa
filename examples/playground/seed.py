"""Create the playground's source data: schemas raw__orders and raw__payments in playground.duckdb.

Deterministic (hash-based, no randomness), so every `make demo` builds the same warehouse. Re-running it
resets the sources and drops previously built schemas (the replicated staging__* ones included) and the
state store, as a fresh playground should.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
CUSTOMERS = 1_000
ORDERS = 20_000

SEED_SQL = f"""
DROP SCHEMA IF EXISTS raw__orders CASCADE;
DROP SCHEMA IF EXISTS raw__payments CASCADE;
DROP SCHEMA IF EXISTS staging__orders CASCADE;
DROP SCHEMA IF EXISTS staging__payments CASCADE;
DROP SCHEMA IF EXISTS staging CASCADE;
DROP SCHEMA IF EXISTS intermediate CASCADE;
DROP SCHEMA IF EXISTS marts CASCADE;
CREATE SCHEMA raw__orders;
CREATE SCHEMA raw__payments;

CREATE TABLE raw__orders.customers AS
SELECT
    i AS customer_id,
    'Customer ' || i AS name,
    lower('customer' || i || '@example.com') AS email,
    ['PT', 'ES', 'FR', 'DE', 'US', 'BR'][1 + (hash(i) % 6)::INT] AS country,
    TIMESTAMP '2025-01-01' + INTERVAL (hash(i * 7) % 300) DAY AS created_at,
    TIMESTAMP '2026-11-01 00:00:00' AS _fivetran_synced
FROM range(1, {CUSTOMERS + 1}) t(i);

CREATE TABLE raw__orders.orders AS
SELECT
    i AS order_id,
    1 + (hash(i) % {CUSTOMERS})::INT AS customer_id,
    TIMESTAMP '2026-01-01' + INTERVAL (hash(i * 3) % (300 * 24 * 60)) MINUTE AS ordered_at,
    ['placed', 'shipped', 'completed', 'completed', 'completed', 'returned'][1 + (hash(i * 5) % 6)::INT]
        AS status,
    round(5 + (hash(i * 11) % 50000) / 100.0, 2) AS amount,
    TIMESTAMP '2026-11-01 00:00:00' + INTERVAL (i % 3600) SECOND AS _fivetran_synced
FROM range(1, {ORDERS + 1}) t(i);

CREATE TABLE raw__payments.payments AS
SELECT
    i AS payment_id,
    i AS order_id,
    ['card', 'card', 'bank_transfer', 'voucher'][1 + (hash(i * 13) % 4)::INT] AS method,
    round(5 + (hash(i * 11) % 50000) / 100.0, 2) AS amount,
    TIMESTAMP '2026-11-01 00:00:00' + INTERVAL (i % 3600) SECOND AS _fivetran_synced
FROM range(1, {ORDERS + 1}) t(i)
WHERE hash(i * 17) % 20 <> 0;  -- about 5% of orders are still unpaid
"""


def main() -> int:
    db = HERE / "playground.duckdb"
    con = duckdb.connect(str(db))
    try:
        con.execute(SEED_SQL)
    finally:
        con.close()
    state = HERE / "models" / ".rocky-state.db"
    for leftover in (state, Path(f"{state}-wal"), Path(f"{state}-shm")):
        leftover.unlink(missing_ok=True)
    print(f"seeded {db.name}: {CUSTOMERS} customers, {ORDERS} orders, payments for ~95% of orders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
