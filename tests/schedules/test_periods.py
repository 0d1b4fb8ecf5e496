from datetime import UTC, datetime, timedelta

import pytest

from schedules.periods import (
    PartitionKeyError,
    has_started,
    newest_started,
    parse_partition_key,
    validate_timezone,
)


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("partitioning", "key", "tz", "start", "end"),
    [
        ("daily", "2026-11-28", "UTC", utc(2026, 11, 28), utc(2026, 11, 29)),
        ("daily", "2026-11-28", "Europe/Berlin", utc(2026, 11, 27, 23), utc(2026, 11, 28, 23)),
        # spring-forward day in Berlin is 23 hours long, fall-back day 25
        ("daily", "2026-03-29", "Europe/Berlin", utc(2026, 3, 28, 23), utc(2026, 3, 29, 22)),
        ("daily", "2026-10-25", "Europe/Berlin", utc(2026, 10, 24, 22), utc(2026, 10, 25, 23)),
        ("hourly", "2026-11-28T05", "UTC", utc(2026, 11, 28, 5), utc(2026, 11, 28, 6)),
        # the repeated hour on fall-back day belongs to one key (first occurrence onwards)
        ("hourly", "2026-10-25T02", "Europe/Berlin", utc(2026, 10, 25, 0), utc(2026, 10, 25, 2)),
        ("monthly", "2026-12", "UTC", utc(2026, 12, 1), utc(2027, 1, 1)),
        ("monthly", "2026-02", "Asia/Tokyo", utc(2026, 1, 31, 15), utc(2026, 2, 28, 15)),
        ("monthly", "2026-11", "Pacific/Kiritimati", utc(2026, 10, 31, 10), utc(2026, 11, 30, 10)),
        # Santiago skips midnight on its spring-forward day: the day starts at 01:00 local
        ("daily", "2026-09-06", "America/Santiago", utc(2026, 9, 6, 4), utc(2026, 9, 7, 3)),
    ],
)
def test_parse_partition_key_gives_the_utc_interval(partitioning, key, tz, start, end):
    interval = parse_partition_key(partitioning, key, tz)
    assert (interval.start, interval.end) == (start, end)


@pytest.mark.parametrize(
    ("partitioning", "key"),
    [
        ("daily", "28.11.2026"),
        ("daily", "2026-11-28T05"),
        ("daily", "2026-02-30"),
        ("hourly", "2026-11-28"),
        ("hourly", "2026-11-28T24"),
        ("monthly", "2026-13"),
        ("monthly", "2026-11-01"),
        ("none", "2026-11-28"),
    ],
)
def test_parse_partition_key_refuses_keys_of_another_format(partitioning, key):
    with pytest.raises(PartitionKeyError) as info:
        parse_partition_key(partitioning, key)
    assert info.value.expected_format in str(info.value)


def test_parse_partition_key_refuses_an_hour_skipped_by_spring_forward():
    with pytest.raises(PartitionKeyError):
        parse_partition_key("hourly", "2026-03-29T02", "Europe/Berlin")


def test_unpartitioned_dataset_has_one_partition_without_interval():
    assert parse_partition_key("none", "") is None


@pytest.mark.parametrize(
    ("partitioning", "key", "tz"),
    [
        ("daily", "9999-12-31", "UTC"),
        ("monthly", "9999-12", "UTC"),
        ("daily", "0001-01-01", "Asia/Tokyo"),
        ("hourly", "0001-01-01T00", "Europe/Berlin"),
        ("daily", "9999-12-31", "America/New_York"),
    ],
)
def test_parse_partition_key_refuses_periods_beyond_the_calendar(partitioning, key, tz):
    with pytest.raises(PartitionKeyError):
        parse_partition_key(partitioning, key, tz)


SKEW = timedelta(minutes=5)
NOW = datetime(2026, 11, 29, 22, 57, tzinfo=UTC)  # 23:57 in Berlin, 22:57 in UTC


@pytest.mark.parametrize(
    ("partitioning", "key", "zone", "started"),
    [
        ("daily", "2026-11-29", "UTC", True),
        ("daily", "2026-11-30", "UTC", False),
        ("daily", "2026-11-30", "Europe/Berlin", True),  # starts 23:00 UTC, within the skew
        ("daily", "2026-12-01", "Europe/Berlin", False),
        ("daily", "2027-01-01", "UTC", False),
        ("hourly", "2026-11-29T23", "UTC", True),  # starts in 3 min, within the skew
        ("hourly", "2026-11-30T00", "UTC", False),
        ("monthly", "2026-11", "UTC", True),
        ("monthly", "2026-12", "Europe/Berlin", False),  # starts 2026-11-30 23:00 UTC
    ],
)
def test_has_started_allows_the_skew_and_cuts_periods_in_their_zone(
    partitioning, key, zone, started
):
    interval = parse_partition_key(partitioning, key, zone)
    assert has_started(interval, now=NOW, skew=SKEW) is started


def test_has_started_counts_unpartitioned_data_as_started():
    assert has_started(None, now=NOW, skew=timedelta(0))


@pytest.mark.parametrize(
    ("partitioning", "zone", "newest"),
    [("daily", "UTC", "2026-11-29"), ("daily", "Europe/Berlin", "2026-11-30")],
)
def test_newest_started_is_the_period_containing_now_plus_the_skew(partitioning, zone, newest):
    assert newest_started(partitioning, zone, now=NOW, skew=SKEW).key == newest


@pytest.mark.parametrize("name", ["UTC", "Europe/Paris", "US/Eastern", "Etc/GMT+5"])
def test_validate_timezone_takes_iana_names_and_links(name):
    assert validate_timezone(name).key == name


@pytest.mark.parametrize(
    "name",
    ["localtime", "Factory", "posixrules", "right/UTC", "posix/Europe/Paris", "Mars/Base", "../x"],
)
def test_validate_timezone_refuses_unknown_and_host_dependent_names(name):
    with pytest.raises(ValueError, match=repr(name)):
        validate_timezone(name)
