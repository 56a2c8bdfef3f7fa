SELECT
    CAST(ordered_at AS DATE) AS order_date,
    count(*) AS orders,
    sum(order_amount) AS revenue,
    sum(sum(order_amount)) OVER (ORDER BY CAST(ordered_at AS DATE)) AS cumulative_revenue,
    avg(sum(order_amount)) OVER (
        ORDER BY CAST(ordered_at AS DATE) ROWS BETWEEN 6 PRECEDING AND CURRENT ROW
    ) AS revenue_7d_avg
FROM fct_orders
WHERE status <> 'returned'
GROUP BY 1
