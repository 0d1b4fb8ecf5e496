select
    order_id,
    cast(ordered_at as date) as order_day,
    amount
from {{ source('orders', 'raw_orders') }}
