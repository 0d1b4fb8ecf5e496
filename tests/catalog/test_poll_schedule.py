"""The poll-only cadence without the database (``catalog.poll_schedule``): examples, then
properties of the arithmetic."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.arrival_profiles import Arrival
from catalog.poll_schedule import (
    RATE_FINDS,
    RATE_WINDOW,
    Cadence,
    Window,
    next_sweep,
    offsets,
    window,
)

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
CADENCE = Cadence(minimum=60, maximum=3600, per_page=300)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def plan(
    *,
    previous=60,
    found=False,
    pages=1,
    pending=(),
    reopens=(),
    cadence=CADENCE,
    recently=0,
    over=RATE_WINDOW,
):
    return next_sweep(
        now=NOW,
        previous_interval=previous,
        found=found,
        pages=pages,
        pending=list(pending),
        reopens=list(reopens),
        cadence=cadence,
        found_recently=recently,
        found_over=over,
    )


def test_a_pending_dataset_inside_its_window_keeps_the_group_dense_without_a_find():
    open_now = Window(NOW - minutes(5), NOW + minutes(30))
    assert plan(previous=480, pending=[open_now]) == (60, NOW + minutes(1))
    # Paced by the listing's pages beyond the first.
    assert plan(previous=480, pending=[open_now], pages=3) == (600, NOW + minutes(10))


def test_before_every_window_the_group_backs_off_but_wakes_when_the_first_opens():
    later = Window(NOW + minutes(20), NOW + minutes(50))
    much_later = Window(NOW + minutes(200), NOW + minutes(250))
    assert plan(previous=1920, pending=[later, much_later]) == (3600, NOW + minutes(20))
    # A backoff shorter than the wait is kept.
    assert plan(previous=240, pending=[later]) == (480, NOW + minutes(8))


def test_a_pending_dataset_without_a_profile_keeps_the_plain_backoff():
    later = Window(NOW + minutes(20), NOW + minutes(50))
    assert plan(previous=1920, pending=[later, None]) == (3600, NOW + minutes(60))


def test_a_late_dataset_past_its_window_backs_off():
    past = Window(NOW - minutes(120), NOW - minutes(60))
    assert plan(previous=960, pending=[past]) == (1920, NOW + minutes(32))


def test_nothing_pending_sleeps_until_the_next_period_may_land():
    assert plan(previous=1920, reopens=[NOW + minutes(45)]) == (3600, NOW + minutes(45))
    assert plan(previous=1920) == (3600, NOW + minutes(60))


def test_a_find_keeps_the_group_dense():
    assert plan(previous=3600, found=True) == (60, NOW + minutes(1))


def test_a_busy_group_is_listed_about_once_per_page_per_partition_found():
    # 3 pages, 10 found in the last hour: one find every 6 minutes, 18 minutes for three.
    assert plan(found=True, pages=3, recently=10) == (1080, NOW + minutes(18))
    # The page pacing (10 minutes) is longer: it holds.
    assert plan(found=True, pages=3, recently=60) == (600, NOW + minutes(10))
    # A burst after a quiet hour counts at its own pace: 10 found in 20 minutes.
    assert plan(found=True, recently=10, over=minutes(20)) == (120, NOW + minutes(2))
    # ... over 10 minutes at least.
    assert plan(found=True, recently=10, over=minutes(2)) == (60, NOW + minutes(1))
    assert plan(found=True, recently=5, over=minutes(2)) == (120, NOW + minutes(2))
    # Too few finds to measure a rate: the page pacing alone.
    assert plan(found=True, pages=1, recently=RATE_FINDS - 1) == (60, NOW + minutes(1))


def test_an_empty_sweep_of_a_group_finding_at_a_measured_rate_keeps_its_pace():
    # 3 pages, 10 found in the last hour (one every 6 minutes): an empty sweep is chance,
    # the next one comes at the pace of the finds, not after a doubled interval.
    assert plan(previous=1080, pages=3, recently=10) == (1080, NOW + minutes(18))
    # Finds too few to measure a rate: the plain back-off.
    assert plan(previous=1080, pages=3, recently=RATE_FINDS - 1) == (2160, NOW + minutes(36))


def test_offsets_are_the_10th_and_99th_percentiles_of_the_same_weekday_when_enough():
    # 10 Sundays-ending periods (Saturday's partitions) at 1..10 hours; 5 other days at 0.
    saturday_ends = [datetime(2026, 11, 1, tzinfo=UTC) + timedelta(weeks=w) for w in range(-9, 1)]
    weekend = [Arrival(e, e + timedelta(hours=i + 1)) for i, e in enumerate(saturday_ends)]
    weekday_ends = [datetime(2026, 11, 3 + d, tzinfo=UTC) for d in range(5)]
    weekdays = [Arrival(e, e) for e in weekday_ends]
    sunday = datetime(2026, 11, 29, tzinfo=UTC)
    assert offsets(weekend + weekdays, period_end=sunday, time_zone="UTC", min_periods=5) == (
        3600,
        36000,
    )
    # Too few Tuesdays: all arrivals.
    tuesday = datetime(2026, 12, 1, tzinfo=UTC)
    assert offsets(weekend + weekdays, period_end=tuesday, time_zone="UTC", min_periods=5) == (
        0,
        36000,
    )
    assert offsets(weekdays[:4], period_end=tuesday, time_zone="UTC", min_periods=5) is None


def test_window_of_an_unknown_profile_is_none():
    assert window(NOW, None) is None
    assert window(NOW, (60, 600)) == Window(NOW + minutes(1), NOW + minutes(10))


instants = st.integers(min_value=-600, max_value=600).map(minutes).map(lambda d: NOW + d)
windows = st.one_of(
    st.none(),
    st.tuples(instants, st.integers(min_value=0, max_value=300)).map(
        lambda t: Window(t[0], t[0] + minutes(t[1]))
    ),
)
cadences = st.tuples(
    st.integers(min_value=1, max_value=600),
    st.integers(min_value=0, max_value=7200),
    st.integers(min_value=0, max_value=600),
).map(lambda t: Cadence(minimum=t[0], maximum=t[0] + t[1], per_page=t[2]))


@settings(max_examples=300, deadline=None)
@given(
    previous=st.integers(min_value=1, max_value=10_000),
    found=st.booleans(),
    pages=st.integers(min_value=0, max_value=50),
    pending=st.lists(windows, max_size=6),
    reopens=st.lists(instants, max_size=4),
    cadence=cadences,
    recently=st.integers(min_value=0, max_value=500),
    over=st.integers(min_value=0, max_value=7200),
)
def test_the_cadence_stays_within_its_bounds(
    previous, found, pages, pending, reopens, cadence, recently, over
):
    interval, next_at = next_sweep(
        now=NOW,
        previous_interval=previous,
        found=found,
        pages=pages,
        pending=pending,
        reopens=reopens,
        cadence=cadence,
        found_recently=recently,
        found_over=timedelta(seconds=over),
    )
    floor = max(cadence.minimum, max(pages - 1, 0) * cadence.per_page)
    if recently >= RATE_FINDS:
        # About one page per partition found: the least whole second that, at the rate
        # measured over 10 to 60 minutes, finds as many partitions as the listing has pages.
        span = min(max(over, 600), 3600)
        rate_floor = next(s for s in range(1, 400_000) if s * recently >= max(pages, 1) * span)
        floor = max(floor, rate_floor)
    dense = min(floor, cadence.maximum)
    # The interval is within the bounds and never shorter than the pacing allows.
    assert cadence.minimum <= interval <= cadence.maximum
    assert interval >= dense
    # The next sweep is never sooner than the dense interval nor later than the interval.
    assert NOW + timedelta(seconds=dense) <= next_at <= NOW + timedelta(seconds=interval)
    expected_now = any(w is not None and w.opens <= NOW <= w.closes for w in pending)
    if found or expected_now or recently >= RATE_FINDS:
        assert (interval, next_at) == (dense, NOW + timedelta(seconds=dense))
    else:
        # Backing off: the interval doubles (within the bounds).
        assert interval == min(max(previous * 2, dense), cadence.maximum)
        if None not in pending:
            # No window opening ahead is slept through (unless sooner than dense).
            openings = [w.opens for w in pending if w.opens > NOW]
            openings += [at for at in reopens if at > NOW]
            for at in openings:
                assert next_at <= max(at, NOW + timedelta(seconds=dense))


@settings(max_examples=200, deadline=None)
@given(
    seconds=st.lists(st.integers(min_value=-3600, max_value=86_400), min_size=1, max_size=40),
    min_periods=st.integers(min_value=1, max_value=10),
)
def test_offsets_are_observed_and_ordered(seconds, min_periods):
    # One arrival per day, in period order, none a backfill (each later than the last).
    first_end = datetime(2026, 10, 1, tzinfo=UTC)
    arrivals = []
    latest = None
    for day, offset in enumerate(seconds):
        end = first_end + timedelta(days=day)
        ready = end + timedelta(seconds=offset)
        if latest is not None and ready < latest:
            ready = latest
        latest = ready
        arrivals.append(Arrival(end, ready))
    result = offsets(arrivals, period_end=NOW, time_zone="UTC", min_periods=min_periods)
    if len(arrivals) < min_periods:
        assert result is None
        return
    observed = {a.seconds for a in arrivals}
    assert result is not None
    opens, closes = result
    assert opens <= closes
    assert opens in observed and closes in observed
