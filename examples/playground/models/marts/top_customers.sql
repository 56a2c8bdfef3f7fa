-- A view: always current, costs nothing to build.
SELECT customer_id, customer_name, country, lifetime_value
FROM dim_customers
ORDER BY lifetime_value DESC
LIMIT 20
