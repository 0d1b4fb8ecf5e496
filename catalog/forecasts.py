"""At-risk forecasts: when an awaited partition will probably arrive, and why. Pure: no
ORM, no Django; instants and durations are whole seconds (UTC epoch seconds for
instants), so the catalog and ``bench/forecast.py`` run the very same arithmetic.

The model, for a partition that is not ready yet (``estimate``):

    estimate = max(now, own, for each upstream U behind its usual time: arrival(U) + lag(U))

- ``own``: from the dataset's own arrival profile (``catalog.arrival_profiles``), the
  group of its period's weekday (``unusual_rule.group_for``): the period's end plus p90
  while that is still ahead (``p90``: on its usual time); past p90 the partition is
  later than usual (``overdue``) and ``own`` is ``now`` plus a share of how far past
  p90 it already is: a quarter (``DEFAULT_OVERDUE_PERCENT``) while it is not yet past
  its p99, half (``DEFAULT_PAST_P99_PERCENT``) once it is. Noise overshoots p90 by
  little and an incident (a delayed or stuck run) by hours, so the longer a partition
  is behind, the later it is expected; past p99 it is later than 99 periods in 100
  were, an incident rather than noise, and the larger share says so. Its downstreams
  are warned while their chain of lags still leaves time (with ``now`` alone, the lead
  was at most that chain's lags: minutes for an hourly dataset a hop or two down).
- upstreams: the datasets read by the jobs that write this one (verified lineage),
  with the upstream partitions covering this period (same or finer partitioning; a
  daily dataset reading an hourly one needs its 24 hours). ``arrival(U)`` is the
  latest covering partition's ready time, or its own estimate while it is awaited,
  recursively (memoised, at most ``max_depth`` hops; beyond that, or around a cycle,
  an upstream counts by its own profile only). An upstream on its usual time (ready by
  its p90, or awaited before it) is left out: the dataset's own profile already holds
  what that means, and adding a lag to every on-time upstream only stacks up noise.
  ``lag(U)`` is learned (``edge_lags``): the median time the job took to follow U in
  the past periods when U held it up later than usual; for an upstream that seldom
  held it up, the job's own time to follow its last input, whichever that was (once
  U is late enough to hold the job up, the job follows it as it follows any input).
- An upstream partition that failed (its current revision is failed) blocks the
  estimate: no time can be given, and the partition is at risk. An upstream already
  past its own deadline is later than usual, so it counts with at least ``now``.

The answer (``Estimate``) carries the instant, the term that set it (``quantile``:
``p90`` or ``overdue`` for the own profile, ``upstream_lag`` for an upstream,
``failed`` when blocked, ``ready``) and the upstream partition that causes it: ``via``
the direct upstream, ``cause`` the furthest one up the chain (the root of the delay).

``bench/forecast.py`` measures it on a simulated graph; every choice above (p90 for the
own term, leaving on-time upstreams out, the median lag on late hold-ups and the
job's lag for a seldom-binding upstream, a quarter of the lateness past p90 and half
past p99: a flat 30% or 50% took precision below 0.8) was made there, against
precision as much as recall.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from .arrival_profiles import ArrivalProfile, nearest_rank, weekday_of
from .unusual_rule import group_for

READY = "ready"
FAILED = "failed"
AWAITED = "awaited"

DEFAULT_MAX_DEPTH = 8
DEFAULT_LAG_PERCENT = 50
DEFAULT_MIN_LAG_PERIODS = 5
DEFAULT_OVERDUE_PERCENT = 25
DEFAULT_PAST_P99_PERCENT = 50

PartitionRef = tuple[Hashable, str]  # (dataset id, partition key)


@dataclass(frozen=True)
class OwnProfile:
    """A dataset's usual arrival for one period's group: ``p50_seconds``,
    ``p90_seconds``, ``p99_seconds`` after the period's end (the model uses p90; the
    others are shown); ``group`` names it
    (``"tuesday"``, ``"business_days"``, ``"weekends"``)."""

    p50_seconds: int
    p90_seconds: int
    p99_seconds: int
    group: str = ""


def own_profile(
    profile: ArrivalProfile | None, period_end: datetime, *, time_zone: str
) -> OwnProfile | None:
    """The ``OwnProfile`` of the period ending at ``period_end`` (aware) from a learned
    ``ArrivalProfile``: its weekday's group, else business days or weekends; None when
    there is no profile or the group has no quantiles."""
    if profile is None:
        return None
    found = group_for(profile, weekday_of(period_end, time_zone))
    if found is None:
        return None
    name, q = found
    assert q.p50_seconds is not None and q.p90_seconds is not None and q.p99_seconds is not None
    return OwnProfile(q.p50_seconds, q.p90_seconds, q.p99_seconds, name)


@dataclass(frozen=True)
class PartitionState:
    """What is known of one partition: ``period_end`` (epoch seconds), ``state``
    (``ready``, ``failed`` or ``awaited``), ``ready_at`` (epoch seconds, when ready),
    ``deadline`` (epoch seconds, None without an SLA) and ``own`` (None: too little
    history)."""

    period_end: int
    state: str = AWAITED
    ready_at: int | None = None
    deadline: int | None = None
    own: OwnProfile | None = None


@dataclass(frozen=True)
class Upstream:
    """One upstream of a partition: the upstream ``dataset``, the ``keys`` of its
    partitions covering the period, and the learned ``lag_seconds`` (None: not learned
    yet, so the upstream sets no time; a failed one still blocks)."""

    dataset: Hashable
    keys: tuple[str, ...]
    lag_seconds: int | None


class World(Protocol):
    """Where the model reads partitions and lineage from (the catalog's tables, or the
    bench's simulation)."""

    def partition(self, dataset: Hashable, key: str) -> PartitionState:
        """The state of ``dataset``'s partition ``key`` (awaited when not seen yet)."""
        ...

    def upstreams(self, dataset: Hashable, key: str) -> Iterable[Upstream]:
        """The upstreams of ``dataset``'s partition ``key`` (none for a source)."""
        ...


@dataclass(frozen=True)
class Estimate:
    """When a partition is expected.

    ``at``: epoch seconds (None when ``blocked`` or nothing is known); ``quantile``:
    the term that set it (``ready``, ``p90``, ``overdue``, ``upstream_lag``,
    ``failed``, ``now`` when only the clock bounds it, ``unknown``); ``blocked``: a
    failed partition up the chain stops it; ``via``: the direct upstream partition
    whose term set it; ``cause``: the furthest partition up the chain that does
    (itself for a failed partition; None when its own profile sets it); ``on_track``:
    ready or expected within its usual time (by p90; with no profile: nothing known
    against it), so its downstreams need not count it.
    """

    at: int | None
    quantile: str
    blocked: bool = False
    via: PartitionRef | None = None
    cause: PartitionRef | None = None
    on_track: bool = False

    def at_risk(self, deadline: int | None) -> bool:
        """Whether the partition will probably miss ``deadline`` (epoch seconds): blocked,
        or expected after it. Never with no deadline or no estimate."""
        if deadline is None:
            return False
        return self.blocked or (self.at is not None and self.at > deadline)


@dataclass
class Forecaster:
    """Estimates for one instant, with one memo shared across partitions (a pass
    forecasting many partitions computes each upstream once).

    ``now``: epoch seconds; ``max_depth``: upstream hops followed; ``use_lineage``:
    False gives the own-profile-only baseline; ``overdue_percent`` and
    ``past_p99_percent``: the share of its lateness past p90 an overdue partition is
    expected later still, before and after its p99 (``own_term``).
    """

    world: World
    now: int
    max_depth: int = DEFAULT_MAX_DEPTH
    use_lineage: bool = True
    overdue_percent: int = DEFAULT_OVERDUE_PERCENT
    past_p99_percent: int = DEFAULT_PAST_P99_PERCENT
    _memo: dict[PartitionRef, Estimate] = field(default_factory=dict)
    _open: set[PartitionRef] = field(default_factory=set)

    def estimate(self, dataset: Hashable, key: str, *, depth: int = 0) -> Estimate:
        """The estimate for ``dataset``'s partition ``key`` at ``now``; never earlier
        than ``now`` unless it is ready (then its ready time)."""
        ref = (dataset, key)
        known = self._memo.get(ref)
        if known is not None:
            return known
        state = self.world.partition(dataset, key)
        if state.state == READY:
            assert state.ready_at is not None
            usual = state.own is not None and (
                state.ready_at <= state.period_end + state.own.p90_seconds
            )
            result = Estimate(at=state.ready_at, quantile=READY, on_track=usual)
        elif state.state == FAILED:
            result = Estimate(at=None, quantile=FAILED, blocked=True, cause=ref)
        else:
            result = self._awaited(ref, state, depth)
        if depth == 0 or result.quantile in (READY, FAILED) or depth < self.max_depth:
            self._memo[ref] = result
        return result

    def _awaited(self, ref: PartitionRef, state: PartitionState, depth: int) -> Estimate:
        best = own_term(
            state,
            now=self.now,
            overdue_percent=self.overdue_percent,
            past_p99_percent=self.past_p99_percent,
        )
        if not self.use_lineage or depth >= self.max_depth or ref in self._open:
            return best
        self._open.add(ref)
        try:
            for upstream in self.world.upstreams(*ref):
                term = self._upstream_term(upstream, depth + 1)
                if term is None:
                    continue
                if term.blocked:
                    return term
                assert term.at is not None
                if best.at is None or term.at > best.at:
                    best = term
        finally:
            self._open.discard(ref)
        return best

    def _upstream_term(self, upstream: Upstream, depth: int) -> Estimate | None:
        """The latest covering partition's arrival (or estimate) plus the lag; None when
        nothing is known of them, or its lag is not learned yet (a failure blocks all the
        same: it needs no lag to say the partition cannot come)."""
        latest: Estimate | None = None
        latest_key = ""
        for key in upstream.keys:
            found = self.estimate(upstream.dataset, key, depth=depth)
            if found.blocked:
                return Estimate(
                    at=None,
                    quantile=FAILED,
                    blocked=True,
                    via=(upstream.dataset, key),
                    cause=found.cause,
                )
            if found.on_track or found.at is None:
                # On its usual time (or nothing known): the dataset's own profile
                # already holds what such an upstream means.
                continue
            if latest is None or found.at > (latest.at or 0):
                latest, latest_key = found, key
        if latest is None or latest.at is None or upstream.lag_seconds is None:
            return None
        via = (upstream.dataset, latest_key)
        cause = via if latest.quantile == READY or latest.cause is None else latest.cause
        return Estimate(
            at=max(self.now, latest.at + upstream.lag_seconds),
            quantile="upstream_lag",
            via=via,
            cause=cause,
        )


def own_term(
    state: PartitionState,
    *,
    now: int,
    overdue_percent: int = DEFAULT_OVERDUE_PERCENT,
    past_p99_percent: int = DEFAULT_PAST_P99_PERCENT,
) -> Estimate:
    """The estimate from the partition's own profile alone (see the module's rule):
    before p90, the period's end plus p90; past it, ``now`` plus ``overdue_percent``
    percent of the time since p90 (seconds, rounded down), or ``past_p99_percent``
    percent once the period's end plus p99 has passed; ``now`` when there is no
    profile."""
    own = state.own
    if own is None:
        return Estimate(at=now, quantile="now", on_track=True)
    elapsed = now - state.period_end
    if elapsed < own.p90_seconds:
        return Estimate(
            at=max(now, state.period_end + own.p90_seconds), quantile="p90", on_track=True
        )
    # Past its usual time: a partition this far behind is seldom about to land (noise
    # overshoots p90 by little; an incident by a lot), so it is expected a share of its
    # lateness later still, which its downstreams feel through their lags at once. Past
    # p99 it is later than 99 periods in 100 were: an incident, so a larger share.
    behind = elapsed - own.p90_seconds
    percent = past_p99_percent if elapsed >= own.p99_seconds else overdue_percent
    return Estimate(at=now + behind * percent // 100, quantile="overdue")


def estimate(
    world: World,
    dataset: Hashable,
    key: str,
    *,
    now: int,
    max_depth: int = DEFAULT_MAX_DEPTH,
    use_lineage: bool = True,
) -> Estimate:
    """One partition's estimate at ``now`` (epoch seconds); see ``Forecaster`` to share
    the memo across many."""
    return Forecaster(world, now, max_depth=max_depth, use_lineage=use_lineage).estimate(
        dataset, key
    )


def edge_lags(
    history: Iterable[tuple[int, Mapping[Hashable, int], int]],
    *,
    percent: int = DEFAULT_LAG_PERCENT,
    min_periods: int = DEFAULT_MIN_LAG_PERIODS,
) -> dict[Hashable, int | None]:
    """The learned lag of each upstream of one dataset, from past periods given as
    ``(period_end, {upstream: arrival}, arrival)`` (epoch seconds; an upstream's
    arrival for a period is the latest of its partitions covering it).

    The lag of an upstream is the ``percent`` percentile of ``arrival - upstream
    arrival`` over the periods in which it held the job up (it was the last input to
    arrive) later than it usually does (at or after the median of those periods'
    upstream arrivals): how long the job takes once a late upstream lands, without the
    slack a job on a fixed schedule has when its inputs are early. With fewer than
    ``min_periods`` such periods, all the periods it held the job up. An upstream that
    held the job up in fewer than ``min_periods`` periods gets the job's lag: the same
    rule over the periods held up by any input (``arrival`` minus the last input's
    arrival), since once it is late enough to be the last input the job follows it as
    it follows any other (its lags over every period are mostly the wait for the other
    inputs, which a delay of its own eats into).

    Returns:
        ``{upstream: lag seconds or None}`` for every upstream seen; None with fewer
        than ``min_periods`` periods in all.
    """
    binding: dict[Hashable, list[tuple[int, int, int]]] = {}
    last_input: list[tuple[int, int, int]] = []
    for period_end, upstream_arrivals, arrival in history:
        if not upstream_arrivals:
            continue
        last = max(upstream_arrivals, key=lambda u: upstream_arrivals[u])
        for upstream in upstream_arrivals:
            binding.setdefault(upstream, [])
        at = upstream_arrivals[last]
        binding[last].append((at - period_end, at, arrival))
        last_input.append((at - period_end, at, arrival))
    enough = max(min_periods, 1)
    job = _late_hold_up_lag(last_input, percent=percent, enough=enough)
    return {
        upstream: _late_hold_up_lag(held, percent=percent, enough=enough)
        if len(held) >= enough
        else job
        for upstream, held in binding.items()
    }


def _late_hold_up_lag(held: list[tuple[int, int, int]], *, percent: int, enough: int) -> int | None:
    """The lag over hold-ups ``(offset, input arrival, arrival)``: over the later half of
    them (offset at or after the median) when that has ``enough``, else over all; None
    with fewer than ``enough``."""
    if len(held) < enough:
        return None
    median = nearest_rank(sorted(offset for offset, _, _ in held), 50)
    late = [(at, arrival) for offset, at, arrival in held if offset >= median]
    chosen = late if len(late) >= enough else [(at, arrival) for _, at, arrival in held]
    return lag_seconds(chosen, percent=percent, min_periods=enough)


def lag_seconds(
    pairs: Iterable[tuple[int, int]],
    *,
    percent: int = DEFAULT_LAG_PERCENT,
    min_periods: int = DEFAULT_MIN_LAG_PERIODS,
) -> int | None:
    """The learned lag of an edge: the nearest-rank ``percent`` percentile of
    ``downstream_ready - upstream_ready`` (seconds) over ``pairs`` of
    ``(upstream_ready, downstream_ready)`` epoch seconds for the same periods; None with
    fewer than ``min_periods`` pairs."""
    values = sorted(down - up for up, down in pairs)
    if len(values) < max(min_periods, 1):
        return None
    return nearest_rank(values, percent)
