"""``schedules.cron_checks``: precise refusals, never-firing expressions and warnings, by
example (the property test against a brute-force oracle is ``test_cron_checks_oracle``)."""

from datetime import UTC, datetime

import pytest

from schedules import CronError, CronRefused, check_cron, local_and_utc, next_deadlines
from schedules.cron_checks import (
    DAY_OF_MONTH_OR_DAY_OF_WEEK,
    EVERY_MINUTE_OF_FIXED_HOUR,
    NOT_EVERY_YEAR,
)


@pytest.mark.parametrize(
    ("expression", "field", "value", "message"),
    [
        ("75 * * * *", "minute", "75", "minute field '75' is out of range 0-59"),
        ("0,75 * * * *", "minute", "75", "minute field '0,75': '75' is out of range 0-59"),
        ("0 24 * * *", "hour", "24", "hour field '24' is out of range 0-23"),
        ("0 6 0 * *", "day-of-month", "0", "day-of-month field '0' is out of range 1-31"),
        ("0 6 32 * *", "day-of-month", "32", "day-of-month field '32' is out of range 1-31"),
        ("0 6 * 13 *", "month", "13", "month field '13' is out of range 1-12"),
        ("0 6 * * 8", "day-of-week", "8", "day-of-week field '8' is out of range 0-7"),
        ("0 6 * * 1-9", "day-of-week", "9", "day-of-week field '1-9': '9' is out of range 0-7"),
        ("0 x * * *", "hour", "x", "hour field 'x' is not a number or name; allowed: 0-23"),
        ("0 6 * foo *", "month", "foo", "allowed: 1-12 or JAN-DEC"),
        ("0 22-2 * * *", "hour", "22-2", "runs backwards (22 > 2); ranges do not wrap"),
        ("*/0 * * * *", "minute", "*/0", "step '0'; a step is a whole number from 1"),
        ("0 6 * * MON#6", "day-of-week", "MON#6", "nth '6'; the nth weekday is 1-5"),
        ("0 6 1#2 * *", "day-of-month", "1#2", "only day-of-week allows"),
        ("0 6 15W * *", "day-of-month", "15W", "supported only as 'LW'"),
        ("0 L * * *", "hour", "L", "only day-of-month (L, LW) and day-of-week (5L) allow"),
        ("0 6 * * fril", "day-of-week", "fril", "'L' follows a weekday number 0-7"),
        ("0 6 ? * MON", "day-of-month", "?", "'?', which is not supported"),
        ("0 6 1,,2 * *", "day-of-month", "1,,2", "an empty list item"),
        ("0 6 L/2 * *", "day-of-month", "L/2", "takes no step"),
        ("0 6 * * 5L/2", "day-of-week", "5L/2", "'L' follows a weekday number"),
        ("* * * * 0-0/2", "day-of-week", "0-0/2", "write '0' for the one value or '0/2'"),
        ("5-5/10 * * * *", "minute", "5-5/10", "a one-value range with a step"),
        ("0 6 * * SUN-SUN/2", "day-of-week", "SUN-SUN/2", "a one-value range with a step"),
    ],
)
def test_check_cron_names_field_value_and_range(expression, field, value, message):
    with pytest.raises(CronRefused) as refused:
        check_cron(expression)
    assert refused.value.rule == "cron_expression"
    assert refused.value.cron_field == field
    assert refused.value.value == value
    assert message in str(refused.value)
    assert "Bad " not in str(refused.value)


@pytest.mark.parametrize("expression", ["0 0 * * * *", "0 * * *", "@daily"])
def test_check_cron_refuses_other_field_counts(expression):
    with pytest.raises(CronError, match="expected 5 fields"):
        check_cron(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 0 30 2 *", "day-of-month '30' never falls in month February: at most 29 days"),
        ("0 0 31 2 *", "never falls in month February"),
        ("0 0 31 4,6,9,11 *", "April, June, September, November: at most 30 days"),
        ("0 0 31 FEB,APR *", "at most 30 days"),
        ("0 0 31/5 4 *", "never falls"),  # 31 only
        ("0 0 30-31 2 *", "never falls"),
        # Both fields must match (one starts with '*'): no 31st is in February.
        ("0 0 31 2 */2", "no day in month February matches both"),
        ("0 0 */2 2 MON#5", None),  # fires: 29 February on a Monday, odd day
    ],
)
def test_check_cron_refuses_what_never_fires(expression, message):
    if message is None:
        assert NOT_EVERY_YEAR in [w.code for w in check_cron(expression).warnings]
        return
    with pytest.raises(CronRefused, match=message) as refused:
        check_cron(expression)
    assert refused.value.rule == "cron_never_fires"


def test_check_cron_allows_leap_day_and_last_days():
    assert [w.code for w in check_cron("0 0 29 2 *").warnings] == [NOT_EVERY_YEAR]
    assert "only in leap years" in check_cron("0 0 29 2 *").warnings[0].message
    for expression in ("0 0 L 2 *", "0 0 LW * *", "0 0 * 2 5L", "0 0 * * MON#5"):
        assert check_cron(expression).warnings == ()


@pytest.mark.parametrize(
    ("expression", "codes"),
    [
        ("* 6 * * *", [EVERY_MINUTE_OF_FIXED_HOUR]),
        ("0-59 6,18 * * *", [EVERY_MINUTE_OF_FIXED_HOUR]),
        ("*/1 9-17 * * 1-5", [EVERY_MINUTE_OF_FIXED_HOUR]),
        ("* * * * *", []),  # every minute, on purpose
        ("*/5 6 * * *", []),
        ("0 6 1 * MON", [DAY_OF_MONTH_OR_DAY_OF_WEEK]),
        ("0 6 1-7 * 1", [DAY_OF_MONTH_OR_DAY_OF_WEEK]),
        ("0 6 30 2 MON", [DAY_OF_MONTH_OR_DAY_OF_WEEK]),  # fires on Mondays only
        ("0 6 1-31 * 0-6", []),  # either reading: every day
        ("0 6 */1 * MON", []),  # starts with '*': both must match
        ("0 6 1 * *", []),
        ("0 6 * * MON#1", []),
    ],
)
def test_check_cron_warnings(expression, codes):
    assert [w.code for w in check_cron(expression).warnings] == codes


def test_warning_messages_suggest_what_to_write():
    (minute,) = check_cron("* 6 * * *").warnings
    assert "60 times a day" in minute.message
    assert "'0 6 * * *'" in minute.message
    (either,) = check_cron("0 6 1-7 * MON").warnings
    assert "OR" in either.message
    assert "'MON#1'" in either.message
    assert "'1L'" in either.message


def test_next_deadlines_in_zone_and_utc_across_dst_change():
    # Berlin springs forward on 29 March 2026: 02:30 does not occur, fires at 03:00 CEST.
    after = datetime(2026, 3, 27, 12, tzinfo=UTC)
    shown = [
        local_and_utc(at, "Europe/Berlin")
        for at in next_deadlines("30 2 * * *", "Europe/Berlin", after, 3)
    ]
    assert shown == [
        {"local": "2026-03-28T02:30:00+01:00", "utc": "2026-03-28T01:30:00Z"},
        {"local": "2026-03-29T03:00:00+02:00", "utc": "2026-03-29T01:00:00Z"},
        {"local": "2026-03-30T02:30:00+02:00", "utc": "2026-03-30T00:30:00Z"},
    ]
