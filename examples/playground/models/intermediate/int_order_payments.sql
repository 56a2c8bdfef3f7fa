SELECT
    o.order_id,
    o.customer_id,
    o.ordered_at,
    o.status,
    o.amount AS order_amount,
    coalesce(sum(p.amount), 0) AS paid_amount,
    count(p.payment_id) AS payment_count
FROM stg_orders o
LEFT JOIN stg_payments p ON p.order_id = o.order_id
GROUP BY ALL
