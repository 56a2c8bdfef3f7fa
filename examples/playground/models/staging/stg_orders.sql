-- Incremental: each run appends orders newer than the newest one already loaded.
SELECT
    order_id,
    customer_id,
    ordered_at,
    status,
    amount
FROM staging__orders.orders
