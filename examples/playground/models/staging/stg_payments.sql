SELECT
    payment_id,
    order_id,
    method AS payment_method,
    amount
FROM staging__payments.payments
