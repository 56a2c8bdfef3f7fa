SELECT
    order_id,
    customer_id,
    ordered_at,
    status,
    order_amount,
    paid_amount,
    order_amount - paid_amount AS outstanding_amount,
    row_number() OVER (PARTITION BY customer_id ORDER BY ordered_at, order_id) AS customer_order_seq
FROM int_order_payments
