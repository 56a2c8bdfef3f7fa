SELECT
    customer_id,
    name AS customer_name,
    email,
    country,
    created_at
FROM staging__orders.customers
