SELECT
    c.customer_id,
    c.customer_name,
    c.country,
    coalesce(co.order_count, 0) AS order_count,
    coalesce(co.lifetime_value, 0) AS lifetime_value,
    co.first_order_at,
    co.last_order_at
FROM stg_customers c
LEFT JOIN int_customer_orders co ON co.customer_id = c.customer_id
