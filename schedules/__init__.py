"""Pure schedule arithmetic: cron deadlines in IANA zones, logical periods, DST rules,
business-day calendars.

No Django and no app imports: the catalog's freshness evaluation and the independent
watchdog both use it.
"""

from .calendars import NEXT_BUSINESS_DAY, SKIP, BusinessCalendar, CalendarError
from .cron_checks import CheckedCron, CronRefused, CronWarning, check_cron, validate_cron
from .deadlines import (
    CronError,
    as_read,
    describe,
    local_and_utc,
    next_deadline,
    next_deadlines,
    previous_deadline,
)
from .periods import (
    DAILY,
    HOURLY,
    MONTHLY,
    NONE,
    LogicalInterval,
    PartitionKeyError,
    Period,
    has_started,
    newest_started,
    parse_partition_key,
    period_containing,
    periods_ending_in,
)
from .sla import FreshnessSla, late_seconds

__all__ = [
    "DAILY",
    "HOURLY",
    "MONTHLY",
    "NEXT_BUSINESS_DAY",
    "NONE",
    "SKIP",
    "BusinessCalendar",
    "CalendarError",
    "CheckedCron",
    "CronError",
    "CronRefused",
    "CronWarning",
    "FreshnessSla",
    "LogicalInterval",
    "PartitionKeyError",
    "Period",
    "as_read",
    "check_cron",
    "describe",
    "has_started",
    "late_seconds",
    "local_and_utc",
    "newest_started",
    "next_deadline",
    "next_deadlines",
    "parse_partition_key",
    "period_containing",
    "periods_ending_in",
    "previous_deadline",
    "validate_cron",
]
