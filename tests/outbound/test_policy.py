import random
from datetime import UTC, datetime

import pytest

from outbound import Decision, backoff_delay, classify, parse_retry_after

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "decision"),
    [
        (200, Decision.SUCCEEDED),
        (204, Decision.SUCCEEDED),
        (None, Decision.RETRY),
        (408, Decision.RETRY),
        (425, Decision.RETRY),
        (429, Decision.RETRY),
        (500, Decision.RETRY),
        (502, Decision.RETRY),
        (503, Decision.RETRY),
        (410, Decision.GONE),
        (301, Decision.REJECTED),
        (400, Decision.REJECTED),
        (401, Decision.REJECTED),
        (403, Decision.REJECTED),
        (404, Decision.REJECTED),
        (422, Decision.REJECTED),
    ],
)
def test_classify_status(status, decision):
    assert classify(status, now=NOW).decision == decision


def test_retry_after_is_honoured_only_for_429_and_503():
    assert classify(429, retry_after="7", now=NOW).retry_after_seconds == 7
    assert classify(503, retry_after="7", now=NOW).retry_after_seconds == 7
    assert classify(500, retry_after="7", now=NOW).retry_after_seconds is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120),
        ("0", 0),
        ("Sun, 29 Nov 2026 12:00:30 GMT", 30),
        ("Sun, 29 Nov 2026 11:00:00 GMT", 0),
        ("999999", 3600),
        ("soon", None),
        (None, None),
    ],
)
def test_parse_retry_after(value, seconds):
    assert parse_retry_after(value, now=NOW) == seconds


def test_backoff_is_full_jitter_within_a_capped_exponential_window():
    rng = random.Random(7)
    for attempt, window in [(1, 10), (2, 20), (3, 40), (10, 300), (30, 300)]:
        delays = [
            backoff_delay(attempt, base_seconds=10, cap_seconds=300, rng=rng) for _ in range(500)
        ]
        assert min(delays) >= 0 and max(delays) <= window
        assert max(delays) > window * 0.9  # the whole window is used, not a fixed step


def test_backoff_never_undercuts_retry_after():
    delays = [
        backoff_delay(1, base_seconds=1, cap_seconds=10, retry_after_seconds=30) for _ in range(50)
    ]
    assert min(delays) == 30
