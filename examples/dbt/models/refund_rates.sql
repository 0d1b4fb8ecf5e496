-- The hidden read: main.raw_refunds is named directly, so dbt's graph (and the inputs
-- dbt-ol reports) do not include it; the compiled SQL in the sql facet does.
select
    o.order_day,
    count(distinct r.order_id) * 1.0 / count(distinct o.order_id) as refund_rate
from {{ ref('orders_enriched') }} as o
left join main.raw_refunds as r on r.order_id = o.order_id
group by o.order_day
