"""At-risk forecasts (``catalog.forecasts``), table-driven and by property, no database."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog import arrival_profiles, forecasts
from catalog.arrival_profiles import Arrival
from catalog.forecasts import AWAITED, FAILED, READY, OwnProfile, PartitionState, Upstream

H = 3600
END = 1_800_000_000  # a period end, epoch seconds
OWN = OwnProfile(p50_seconds=2 * H, p90_seconds=3 * H, p99_seconds=4 * H, group="tuesday")


@dataclass
class World:
    """Partitions by (dataset, key); edges by dataset: [(upstream, keys, lag)]."""

    partitions: dict = field(default_factory=dict)
    edges: dict = field(default_factory=dict)

    def partition(self, dataset, key):
        return self.partitions.get((dataset, key), PartitionState(END))

    def upstreams(self, dataset, key):
        return [Upstream(u, keys, lag) for u, keys, lag in self.edges.get(dataset, [])]


def chain(*, up_state: PartitionState, lag: int = H) -> World:
    """``down`` (awaited, profile OWN) reads ``up``."""
    return World(
        partitions={("down", "k"): PartitionState(END, own=OWN), ("up", "k"): up_state},
        edges={"down": [("up", ("k",), lag)]},
    )


@pytest.mark.parametrize(
    ("now", "at", "quantile"),
    [
        (END, END + 3 * H, "p90"),  # before p90: period end + p90
        (END + 3 * H - 1, END + 3 * H, "p90"),
        (END + 3 * H, END + 3 * H, "overdue"),  # at p90: now
        (END + 3 * H + H // 2, END + 3 * H + H // 2 + H // 8, "overdue"),  # a quarter
        (END + 4 * H - 4, END + 4 * H - 4 + (H - 4) // 4, "overdue"),  # just before p99
        (END + 4 * H, END + 4 * H + H // 2, "overdue"),  # at p99, 1 h past p90: half
        (END + 5 * H, END + 5 * H + H, "overdue"),  # 2 h past p90: now + 1 h
    ],
)
def test_own_term_by_elapsed_time(now, at, quantile):
    found = forecasts.own_term(PartitionState(END, own=OWN), now=now)
    assert (found.at, found.quantile) == (at, quantile)


def test_own_term_without_profile_is_now_and_on_track():
    found = forecasts.own_term(PartitionState(END), now=END + 10)
    assert (found.at, found.quantile, found.on_track) == (END + 10, "now", True)


def test_estimate_upstream_on_its_usual_time_is_left_out():
    world = chain(up_state=PartitionState(END, own=OWN))  # awaited, before its p90
    found = forecasts.estimate(world, "down", "k", now=END + H)
    assert (found.at, found.quantile, found.via) == (END + 3 * H, "p90", None)


def test_estimate_upstream_later_than_usual_pushes_it_by_the_lag():
    world = chain(up_state=PartitionState(END, own=OWN), lag=2 * H)
    now = END + 3 * H + H // 2  # the upstream is 30 min past its p90: expected in 7.5
    found = forecasts.estimate(world, "down", "k", now=now)
    assert (found.at, found.quantile) == (now + H // 8 + 2 * H, "upstream_lag")
    assert found.via == found.cause == ("up", "k")
    deadline = now + 2 * H + H // 8
    assert found.at_risk(deadline - 1) and not found.at_risk(deadline)


def test_estimate_late_ready_upstream_counts_with_its_ready_time():
    ready = PartitionState(END, READY, ready_at=END + 4 * H, own=OWN)
    found = forecasts.estimate(chain(up_state=ready, lag=2 * H), "down", "k", now=END + 4 * H)
    assert (found.at, found.via) == (END + 6 * H, ("up", "k"))


def test_estimate_failed_upstream_blocks_and_names_it():
    world = chain(up_state=PartitionState(END, FAILED))
    found = forecasts.estimate(world, "down", "k", now=END)
    assert found.blocked and found.at is None and found.cause == ("up", "k")
    assert found.at_risk(END + 100 * H)
    assert not found.at_risk(None)


def test_estimate_cause_is_the_root_of_a_chain():
    world = World(
        partitions={
            ("a", "k"): PartitionState(END, own=OWN),
            ("b", "k"): PartitionState(END, own=OWN),
            ("c", "k"): PartitionState(END, own=OWN),
        },
        edges={"a": [("b", ("k",), H)], "b": [("c", ("k",), H)]},
    )
    now = END + 5 * H  # everyone 2 h past p90 and past p99 (expected in 1 h); c is the root
    found = forecasts.estimate(world, "a", "k", now=now)
    assert found.at == now + H + 2 * H
    assert found.via == ("b", "k") and found.cause == ("c", "k")
    assert forecasts.estimate(world, "a", "k", now=now, use_lineage=False).at == now + H
    assert forecasts.estimate(world, "a", "k", now=now, max_depth=1).at == now + H + H


def test_estimate_survives_a_cycle():
    world = World(
        partitions={("a", "k"): PartitionState(END, own=OWN), ("b", "k"): PartitionState(END)},
        edges={"a": [("b", ("k",), H)], "b": [("a", ("k",), H)]},
    )
    assert forecasts.estimate(world, "a", "k", now=END + 5 * H).at is not None


def test_estimate_daily_reading_hourly_takes_the_latest_hour():
    hours = {
        ("h", str(i)): PartitionState(END, READY, ready_at=END - H + i, own=OWN) for i in range(24)
    }
    hours[("h", "23")] = PartitionState(END, own=OWN)  # the last hour is overdue
    world = World(
        partitions={("d", "k"): PartitionState(END, own=OWN), **hours},
        edges={"d": [("h", tuple(str(i) for i in range(24)), H)]},
    )
    found = forecasts.estimate(world, "d", "k", now=END + 4 * H)  # h/23: at its p99
    assert (found.at, found.via) == (END + 4 * H + H // 2 + H, ("h", "23"))


def test_own_profile_from_an_arrival_profile():
    monday = datetime(2026, 10, 12, tzinfo=UTC)
    arrivals = [
        Arrival(monday - timedelta(days=d), monday - timedelta(days=d) + timedelta(hours=5))
        for d in range(1, 30)
    ]
    profile = arrival_profiles.profile(arrivals, time_zone="UTC", min_periods=3)
    own = forecasts.own_profile(profile, monday, time_zone="UTC")
    assert own == OwnProfile(5 * H, 5 * H, 5 * H, "monday")
    assert forecasts.own_profile(None, monday, time_zone="UTC") is None


def test_edge_lags_measure_late_hold_ups_and_give_a_seldom_binding_upstream_the_jobs_lag():
    history = []
    for day in range(20):
        end = END + day * 24 * H
        # "a" holds the job up, later on odd days (the job then takes 30 min);
        # "b" is always early: the job waits for "a", not for it. "c" holds it up on
        # three days, 4 h late, and the job follows it in 20 min then.
        a = end + (2 * H if day % 2 else H)
        c = end + 4 * H if day in (3, 9, 15) else end + 600
        last = max(a, c)
        history.append((end, {"a": a, "b": end + 600, "c": c}, last + (1200 if c > a else 1800)))
    lags = forecasts.edge_lags(history, percent=50, min_periods=5)
    assert lags["a"] == 1800
    # Seldom the last input: the time the job takes after its last input, whichever it
    # was (30 min on the 17 days of "a", 20 on the three of "c": median 30 min), not the
    # hours it waited for "a" on the days it was early.
    assert lags["b"] == lags["c"] == 1800
    assert forecasts.edge_lags(history[:3], min_periods=5) == {"a": None, "b": None, "c": None}


def test_lag_seconds_needs_min_periods():
    assert forecasts.lag_seconds([(0, 10)] * 4, min_periods=5) is None
    assert forecasts.lag_seconds([(0, 10)] * 5, min_periods=5) == 10


# --- properties ---------------------------------------------------------------------------


def world_with_delay(delay: int, now: int, lags: tuple[int, int], own: OwnProfile) -> World:
    """a <- b <- c: c's partition arrives ``delay`` seconds after END (or is still awaited
    at ``now``); b is awaited; a is the partition forecast."""
    c_state = (
        PartitionState(END, READY, ready_at=END + delay, own=own)
        if END + delay <= now
        else PartitionState(END, AWAITED, own=own)
    )
    return World(
        partitions={
            ("a", "k"): PartitionState(END, own=own),
            ("b", "k"): PartitionState(END, own=own),
            ("c", "k"): c_state,
        },
        edges={"a": [("b", ("k",), lags[0])], "b": [("c", ("k",), lags[1])]},
    )


owns = st.builds(
    lambda a, b, c: OwnProfile(*sorted((a, b, c))),
    st.integers(0, 10 * H),
    st.integers(0, 10 * H),
    st.integers(0, 10 * H),
)


@settings(max_examples=300, deadline=None)
@given(
    delays=st.tuples(st.integers(0, 20 * H), st.integers(0, 20 * H)),
    elapsed=st.integers(0, 20 * H),
    lags=st.tuples(st.integers(0, 5 * H), st.integers(0, 5 * H)),
    own=owns,
)
def test_estimate_is_monotone_in_upstream_delay_and_never_before_now(delays, elapsed, lags, own):
    now = END + elapsed
    early, late = sorted(delays)
    sooner = forecasts.estimate(world_with_delay(early, now, lags, own), "a", "k", now=now)
    later = forecasts.estimate(world_with_delay(late, now, lags, own), "a", "k", now=now)
    assert sooner.at is not None and later.at is not None
    assert later.at >= sooner.at
    assert sooner.at >= now


@settings(max_examples=300, deadline=None)
@given(
    own=owns,
    elapsed=st.integers(0, 30 * H),
    percent=st.integers(0, 100),
    past_p99=st.integers(0, 100),
    lag=st.integers(0, 5 * H),
)
def test_overdue_partition_is_expected_a_share_of_its_lateness_later(
    own, elapsed, percent, past_p99, lag
):
    """Past p90, an awaited partition is expected ``percent`` of its time past p90 after
    now (``past_p99`` percent once past its p99), and a downstream reading it that much
    plus the lag: the arithmetic of the rule, so a deadline closer than that is at risk
    at once."""
    now = END + elapsed
    state = PartitionState(END, own=own)
    found = forecasts.own_term(state, now=now, overdue_percent=percent, past_p99_percent=past_p99)
    if elapsed < own.p90_seconds:
        assert (found.at, found.quantile) == (END + own.p90_seconds, "p90")
        return
    behind = elapsed - own.p90_seconds
    share = past_p99 if elapsed >= own.p99_seconds else percent
    assert (found.at, found.quantile) == (now + behind * share // 100, "overdue")
    world = World(
        partitions={("down", "k"): PartitionState(END), ("up", "k"): state},
        edges={"down": [("up", ("k",), lag)]},
    )
    down = forecasts.Forecaster(
        world, now, overdue_percent=percent, past_p99_percent=past_p99
    ).estimate("down", "k")
    assert down.at == now + behind * share // 100 + lag
    assert down.at_risk(down.at - 1) and not down.at_risk(down.at)
