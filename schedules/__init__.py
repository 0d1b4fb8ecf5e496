"""Pure schedule arithmetic: cron deadlines in IANA zones, logical periods, DST rules.

No Django and no app imports: the catalog's freshness evaluation and the independent
watchdog both use it.
"""

from .deadlines import CronError, describe, next_deadline, previous_deadline, validate_cron
from .periods import (
    DAILY,
    HOURLY,
    MONTHLY,
    NONE,
    LogicalInterval,
    PartitionKeyError,
    Period,
    parse_partition_key,
    period_containing,
    periods_ending_in,
)
from .sla import FreshnessSla

__all__ = [
    "DAILY",
    "HOURLY",
    "MONTHLY",
    "NONE",
    "CronError",
    "FreshnessSla",
    "LogicalInterval",
    "PartitionKeyError",
    "Period",
    "describe",
    "next_deadline",
    "parse_partition_key",
    "period_containing",
    "periods_ending_in",
    "previous_deadline",
    "validate_cron",
]
