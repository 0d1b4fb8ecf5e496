"""The demo's world: its teams, datasets and consumers, and how each dataset's producer
behaved over the month the history covers.

Everything is data; ``catalog.demo.history`` plays it. Times are relative to the moment
the demo is loaded (``now``): ``age`` counts a dataset's closed periods back from the
newest (age 0 closed last), so the same story reads the same whatever the date.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

DEMO_NAMESPACE = "s3://tidemark-demo"
WAREHOUSE = "postgres://warehouse.internal:5432"
HISTORY_DAYS = 30
# The demo's consumer webhook that fails: its host no longer resolves, as happens when a
# receiver is decommissioned; embedded ``make run`` retries it for real and fails alike.
FAILING_WEBHOOK = "https://reconcile.analytics.example.com/tidemark"
# How long before ``now`` it started failing: less than the delivery engine's
# ``disable_after_failing_seconds`` (24 h), so it is failing but not yet disabled.
FAILING_FOR = timedelta(hours=20)
# The demo's own webhook receiver (``/demo/hooks/<team>``) stands for this in the specs.
DEMO_HOOK = "demo-hook"


@dataclass(frozen=True)
class TeamSpec:
    slug: str
    name: str
    contact_email: str
    paging_routing_key: str = ""
    job_namespace: str = ""  # the OpenLineage job namespace it claims


TEAMS = [
    TeamSpec(
        "orders", "Orders platform", "orders-oncall@example.com", job_namespace="airflow://orders"
    ),
    TeamSpec(
        "analytics",
        "Analytics engineering",
        "analytics@example.com",
        job_namespace="airflow://analytics",
    ),
    # Its critical dataset pages its on-call through the watchdog (a demo routing key).
    TeamSpec(
        "finance",
        "Finance data",
        "finance-data@example.com",
        paging_routing_key="demofinance000000000000000000001",
        job_namespace="dbt://finance",
    ),
]


@dataclass(frozen=True)
class Producer:
    """How a dataset's producer behaved.

    ``cron`` in ``timezone``: when its run usually finishes; each partition lands at the
    first firing after its period closed, give or take ``jitter_minutes``.
    ``late``: ages that landed after their deadline plus grace, by how long after.
    ``lost_events``: ages whose readiness event was lost (the poll found them).
    ``restated``: ages republished as a new version: ``(version, how long after)``.
    ``incomplete``: ages whose manifest waited for its last file for this long (after
    the grace, so the partition was late).
    ``broken``: the partition due at the last judged deadline, and every one after, never
    came (the pipeline fails).
    ``by_poll``: nothing is published; the fallback poll finds every partition.
    """

    cron: str
    timezone: str = "UTC"
    jitter_minutes: float = 15.0
    late: dict[int, timedelta] = field(default_factory=dict)
    lost_events: tuple[int, ...] = ()
    restated: dict[int, tuple[str, timedelta]] = field(default_factory=dict)
    incomplete: dict[int, timedelta] = field(default_factory=dict)
    broken: bool = False
    by_poll: bool = False


@dataclass(frozen=True)
class DatasetSpec:
    team: str
    namespace: str
    name: str
    description: str
    fields: dict
    producer: Producer | None = None
    # Unpartitioned: a new snapshot (its version named by the ISO week) at each firing.
    snapshots: str = ""

    @property
    def identity(self) -> tuple[str, str]:
        return (self.namespace, self.name)


RAW_ORDERS = DatasetSpec(
    "orders",
    DEMO_NAMESPACE,
    "raw/orders",
    "Raw order events, one folder per day.",
    dict(
        partitioning="daily",
        completion_signal="success_marker",
        storage_source="local",
        location_template="raw/orders/dt={partition}/",
        sla_cron="30 6 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=1800,
        criticality="high",
    ),
    Producer(
        "0 5 * * *",
        "Europe/Berlin",
        jitter_minutes=25,
        late={11: timedelta(minutes=95), 22: timedelta(minutes=40)},
        lost_events=(4, 16),
        restated={7: ("rerun-2", timedelta(days=2, hours=3))},
    ),
)
RAW_PAYMENTS = DatasetSpec(
    "orders",
    DEMO_NAMESPACE,
    "raw/payments",
    "Payment provider exports, hourly, with a manifest.",
    dict(
        partitioning="hourly",
        completion_signal="manifest",
        storage_source="local",
        location_template="raw/payments/hour={partition}/",
        sla_cron="15 * * * *",
        criticality="medium",
    ),
    Producer("3 * * * *", jitter_minutes=1.5, incomplete={8: timedelta(minutes=52)}, by_poll=True),
)
RAW_SHIPMENTS = DatasetSpec(
    "orders",
    DEMO_NAMESPACE,
    "raw/shipments",
    "Carrier scans of parcels, one file a day.",
    dict(
        partitioning="daily",
        sla_cron="0 7 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=3600,
        criticality="medium",
    ),
    Producer("20 5 * * *", "Europe/Berlin", jitter_minutes=10, late={18: timedelta(hours=3)}),
)
ORDERS_ROLLUP = DatasetSpec(
    "analytics",
    WAREHOUSE,
    "analytics.public.orders_rollup",
    "Orders and payments per day and market, rolled up for dashboards.",
    dict(
        partitioning="daily",
        sla_cron="0 9 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=3600,
        criticality="high",
    ),
    # Late with raw/orders at age 11, which it reads.
    Producer("40 7 * * *", "Europe/Berlin", jitter_minutes=10, late={11: timedelta(minutes=35)}),
)
DAILY_REVENUE = DatasetSpec(
    "finance",
    WAREHOUSE,
    "finance.public.daily_revenue",
    "Revenue per day and market; feeds the board report.",
    dict(
        partitioning="daily",
        sla_cron="0 8 * * 1-5",
        sla_timezone="America/New_York",
        sla_grace_seconds=1800,
        criticality="critical",
    ),
    Producer(
        "15 7 * * *",
        "America/New_York",
        jitter_minutes=12,
        late={9: timedelta(hours=2, minutes=10)},
        broken=True,
    ),
)
MONTHLY_CLOSE = DatasetSpec(
    "finance",
    WAREHOUSE,
    "finance.public.monthly_close",
    "The books of each month, closed on the second working day.",
    dict(
        partitioning="monthly",
        sla_cron="0 12 3 * *",
        sla_timezone="Europe/Berlin",
        criticality="high",
    ),
    Producer("0 16 2 * *", "Europe/Berlin", jitter_minutes=30),
)
CURRENCIES = DatasetSpec(
    "finance",
    DEMO_NAMESPACE,
    "reference/currencies",
    "Exchange rates to EUR, a new snapshot every Monday.",
    dict(partitioning="none", criticality="low"),
    snapshots="0 6 * * 1",
)
ORDERS_EXPORT = DatasetSpec(
    "orders",
    DEMO_NAMESPACE,
    "exports/orders_v1",
    "The old CSV export of orders; replaced by raw/orders.",
    dict(partitioning="none", criticality="low"),
    snapshots="0 4 * * *",
)

DATASETS = [
    RAW_ORDERS,
    RAW_PAYMENTS,
    RAW_SHIPMENTS,
    ORDERS_ROLLUP,
    DAILY_REVENUE,
    MONTHLY_CLOSE,
    CURRENCIES,
    ORDERS_EXPORT,
]


@dataclass(frozen=True)
class SubscriptionSpec:
    """A consumer team's declaration, made ``age`` before ``now`` (None: when the history
    starts); ``endpoint`` is ``DEMO_HOOK``, another URL, or "" for none."""

    team: str
    dataset: DatasetSpec
    job_namespace: str
    job_name: str
    endpoint: str = ""
    age: timedelta | None = None


SUBSCRIPTIONS = [
    SubscriptionSpec(
        "analytics", RAW_ORDERS, "airflow://analytics", "daily_orders_rollup", DEMO_HOOK
    ),
    # Declared, but its dashboard job is never seen reading it: a stale declaration.
    SubscriptionSpec(
        "analytics", DAILY_REVENUE, "airflow://analytics", "revenue_dashboard", DEMO_HOOK
    ),
    SubscriptionSpec("finance", ORDERS_ROLLUP, "dbt://finance", "revenue_model"),
    SubscriptionSpec(
        "analytics",
        RAW_PAYMENTS,
        "airflow://analytics",
        "payments_reconciliation",
        FAILING_WEBHOOK,
        age=timedelta(hours=25),
    ),
]

# Finance tells its consumers that revenue will exclude refunds; analytics has not
# acknowledged yet.
REVENUE_NOTICE = dict(
    kind="semantic_change",
    description="Revenue will be net of refunds, as the board report counts it.",
    link="https://wiki.example.com/finance/net-revenue",
    require_acknowledgements=True,
)
REVENUE_NOTICE_AGE = timedelta(days=4, hours=3)
REVENUE_NOTICE_EFFECTIVE_IN = timedelta(days=24)
# The old export is deprecated with a notice, then retires after its sunset.
EXPORT_DEPRECATION = dict(
    kind="deprecation",
    description="exports/orders_v1 stops: read raw/orders instead.",
)
EXPORT_DEPRECATION_AGE = timedelta(days=27)
# Analytics reprocessed a week of its rollup after a rounding fix, promoted at once.
ROLLUP_RESTATEMENT = dict(
    version="v2",
    code_version="git:4f2c1e9",
    reason="currency rounding fix",
    first_age=20,
    last_age=14,
    opened_age=10,  # opened two hours after the partition of this age landed
)
