SELECT
    customer_id,
    count(*) AS order_count,
    sum(order_amount) AS lifetime_value,
    min(ordered_at) AS first_order_at,
    max(ordered_at) AS last_order_at
FROM int_order_payments
WHERE status <> 'returned'
GROUP BY customer_id
