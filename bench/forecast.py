"""How well at-risk forecasts warn before a deadline: a simulated lineage graph of about
1,000 datasets, 90 days of history to learn from, then 30 days replayed every 5 minutes.

    .venv/bin/python bench/forecast.py            # about a minute or two; no database

It also counts the pages the same late partitions send with and without holds (one late
root, one page: ``grouping``), and checks that no page for an independent cause (the
inputs it needs on time) was held.

The forecasts are ``catalog.forecasts`` itself (the product's module, not a copy), fed
with profiles from ``catalog.arrival_profiles`` and lags from ``forecasts.lag_seconds``
learned on the first 90 days. The same run replays a baseline (the dataset's own
profile only, no lineage) and prints both, with their ratio; writes
``bench/results/forecast.json``.

The world: six layers of jobs, one dataset per job. Layer 0 are sources (arrive at a
usual offset after their period with lognormal noise, later at weekends); higher layers
read one to three datasets of the layers below. Most jobs start when their inputs are
ready (an orchestrator's trigger, a few minutes' latency); a quarter start at a fixed
time and wait for their inputs (a cron and a sensor). Runtimes are lognormal with a 1%
heavy tail. A fifth of the lower layers is hourly (reading hourly inputs only); a
daily job reading an hourly dataset needs the day's 24 hours. Injected incidents, at
the same rates in history and replay: delays of 1-6 hours (daily) or 30 min-3 h
(hourly) to one run, and failures (a failed revision at the run's end, repaired 1-8
hours later). Deadlines are set from each dataset's history as a team would: the p95
arrival plus 30 minutes (daily, rounded up to 15 minutes) or 10 minutes (hourly,
rounded up to 5).

Truth: a partition is late when it arrives after its deadline. Each is classed by its
cause: an injected delay upstream (an input's run was delayed and that input held the
job up), an injected delay of its own run, a failure (own or upstream), or noise. A
warning is the first 5-minute evaluation, before the deadline and while the partition
is awaited, at which the estimate passes the deadline. Recall = late partitions warned
before their deadline / late partitions; precision = warnings on partitions that were
late / warnings; lead = deadline - warning, for warnings that were right.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import arrival_profiles, forecasts
from catalog.arrival_profiles import WEEKDAYS, Arrival

MIN = 60
HOUR = 3600
DAY = 86400
T0 = int(datetime(2026, 6, 1, tzinfo=UTC).timestamp())  # a Monday
HISTORY_DAYS = 90
REPLAY_DAYS = 30
LAYERS = (200, 250, 200, 150, 120, 80)
HOURLY_SHARE = (0.3, 0.25, 0.15, 0.0, 0.0, 0.0)
LAYER_WEIGHT = (4.0, 3.0, 2.0, 1.0, 0.5, 0.25)
MIN_PERIODS = 14  # the product's TIDEMARK_UNUSUALLY_LATE_MIN_PERIODS default

UPSTREAM_DELAY, OWN_DELAY, FAILURE, NOISE = "upstream_delay", "own_delay", "failure", "noise"


@dataclass
class Node:
    """One simulated dataset and its job."""

    index: int
    layer: int
    hourly: bool
    inputs: list[int]
    kind: str  # source | triggered | scheduled
    base: int  # source: usual offset; scheduled: start offset (set after inputs)
    runtime: int
    sigma: float
    weekend_shift: int = 0
    arrival: list[int] = field(default_factory=list)
    fail_at: dict[int, int] = field(default_factory=dict)
    cause: list[str | None] = field(default_factory=list)
    deadline_offset: int = 0
    own: dict[str, forecasts.OwnProfile | None] = field(default_factory=dict)
    lags: dict[int, int | None] = field(default_factory=dict)

    @property
    def step(self) -> int:
        return HOUR if self.hourly else DAY

    def period_end(self, p: int) -> int:
        return T0 + (p + 1) * self.step

    def covering(self, upstream: Node, p: int) -> range:
        """Keys of ``upstream``'s partitions covering period ``p`` (same or finer)."""
        if upstream.hourly and not self.hourly:
            return range(24 * p, 24 * p + 24)
        return range(p, p + 1)


def build_graph(rng: random.Random) -> list[Node]:
    nodes: list[Node] = []
    by_layer: list[list[int]] = []
    for layer, count in enumerate(LAYERS):
        ids = []
        for _ in range(count):
            hourly = rng.random() < HOURLY_SHARE[layer]
            index = len(nodes)
            if layer == 0:
                kind, inputs = "source", []
            else:
                below = by_layer[layer - 1]
                lower = [i for ids_ in by_layer[:layer] for i in ids_]
                pool_near = [i for i in below if nodes[i].hourly or not hourly]
                pool_far = [i for i in lower if nodes[i].hourly or not hourly]
                if not pool_near and not pool_far:
                    hourly = False
                    pool_near, pool_far = below, lower
                inputs = set()
                for _ in range(rng.choice((1, 1, 2, 2, 3))):
                    pool = pool_near if pool_near and rng.random() < 0.75 else pool_far
                    inputs.add(rng.choice(pool))
                inputs = sorted(inputs)
                kind = "scheduled" if rng.random() < 0.25 else "triggered"
            if hourly:
                base = rng.randint(3 * MIN, 20 * MIN)
                runtime = rng.randint(2 * MIN, 10 * MIN)
            else:
                base = rng.randint(30 * MIN, 4 * HOUR)
                runtime = rng.randint(10 * MIN, 60 * MIN)
            node = Node(
                index=index,
                layer=layer,
                hourly=hourly,
                inputs=list(inputs),
                kind=kind,
                base=base,
                runtime=runtime,
                sigma=rng.uniform(0.08, 0.25),
                weekend_shift=0 if hourly else rng.choice((0, 0, -20 * MIN, 40 * MIN)),
            )
            nodes.append(node)
            ids.append(index)
        by_layer.append(ids)
    return nodes


def inject_incidents(nodes: list[Node], rng: random.Random, days: int) -> dict:
    """``{(dataset, period): ("delay", seconds) | ("failure", repair seconds)}``."""
    daily = [n for n in nodes if not n.hourly]
    hourly = [n for n in nodes if n.hourly]
    incidents: dict[tuple[int, int], tuple[str, int]] = {}

    def pick(pool: list[Node]) -> Node:
        return rng.choices(pool, weights=[LAYER_WEIGHT[n.layer] for n in pool])[0]

    for day in range(days):
        for _ in range(poisson(rng, 2.0)):
            incidents[(pick(daily).index, day)] = ("delay", rng.randint(HOUR, 6 * HOUR))
        for _ in range(poisson(rng, 3.0)):
            node = pick(hourly)
            incidents[(node.index, day * 24 + rng.randrange(24))] = (
                "delay",
                rng.randint(30 * MIN, 3 * HOUR),
            )
        for _ in range(poisson(rng, 1.0)):
            incidents[(pick(daily).index, day)] = ("failure", rng.randint(HOUR, 8 * HOUR))
        for _ in range(poisson(rng, 1.0)):
            node = pick(hourly)
            incidents[(node.index, day * 24 + rng.randrange(24))] = (
                "failure",
                rng.randint(HOUR, 8 * HOUR),
            )
    return incidents


def poisson(rng: random.Random, mean: float) -> int:
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def simulate(nodes: list[Node], incidents: dict, rng: random.Random, days: int) -> None:
    """Arrivals, failures and causes of every partition, layer by layer."""
    for node in nodes:  # nodes are in layer order: inputs come first
        periods = days * (24 if node.hourly else 1)
        ready_inputs = [0] * periods
        binding: list[str | None] = [None] * periods
        for p in range(periods):
            for u in node.inputs:
                up = nodes[u]
                keys = node.covering(up, p)
                at = max(up.arrival[k] for k in keys)
                if at > ready_inputs[p]:
                    ready_inputs[p] = at
                    causes = [up.cause[k] for k in keys if up.arrival[k] == at]
                    binding[p] = causes[0]
        if node.kind == "scheduled":  # a cron at the inputs' usual p70, then a sensor
            offsets = sorted(ready_inputs[p] - node.period_end(p) for p in range(periods // 3))
            node.base = -(-offsets[int(len(offsets) * 0.7)] // (5 * MIN)) * 5 * MIN
        node.arrival, node.cause = [0] * periods, [None] * periods
        for p in range(periods):
            end = node.period_end(p)
            weekend = not node.hourly and WEEKDAYS[weekday(end)] in ("saturday", "sunday")
            cause = None
            if node.kind == "source":
                start = end + int(node.base * math.exp(rng.gauss(0, node.sigma)))
                start += node.weekend_shift if weekend else 0
            elif node.kind == "triggered":
                start = ready_inputs[p] + rng.randint(MIN, 5 * MIN)
                cause = binding[p]
            else:
                start = max(end + node.base, ready_inputs[p])
                cause = binding[p] if ready_inputs[p] > end + node.base else None
            if cause is not None:
                cause = UPSTREAM_DELAY if cause in (UPSTREAM_DELAY, OWN_DELAY) else FAILURE
            incident = incidents.get((node.index, p))
            if incident is not None and incident[0] == "delay":
                start += incident[1]
                cause = OWN_DELAY
            finish = start + int(node.runtime * math.exp(rng.gauss(0, 0.25)))
            if rng.random() < 0.01:  # the heavy tail of an ordinary day
                finish += int(rng.expovariate(1 / (5 * MIN if node.hourly else 20 * MIN)))
            if incident is not None and incident[0] == "failure":
                node.fail_at[p] = finish
                finish += incident[1]
                cause = FAILURE
            node.arrival[p], node.cause[p] = finish, cause


def weekday(epoch: int) -> int:
    return (epoch // DAY + 3) % 7  # 1970-01-01 was a Thursday


def learn(nodes: list[Node], *, lag_percent: int) -> None:
    """Profiles, lags and deadlines from the history days only."""
    for node in nodes:
        periods = HISTORY_DAYS * (24 if node.hourly else 1)
        arrivals = [Arrival(utc(node.period_end(p)), utc(node.arrival[p])) for p in range(periods)]
        profile = arrival_profiles.profile(arrivals, time_zone="UTC", min_periods=MIN_PERIODS)
        for day in range(7):  # one period end on each weekday
            end = utc(T0 + (day + 1) * DAY)
            node.own[WEEKDAYS[end.weekday()]] = forecasts.own_profile(profile, end, time_zone="UTC")
        offsets = sorted(node.arrival[p] - node.period_end(p) for p in range(periods))
        p95 = arrival_profiles.nearest_rank(offsets, 95)
        margin, rounding = (10 * MIN, 5 * MIN) if node.hourly else (30 * MIN, 15 * MIN)
        node.deadline_offset = -(-(p95 + margin) // rounding) * rounding
        history = [
            (
                node.period_end(p),
                {
                    u: max(nodes[u].arrival[k] for k in node.covering(nodes[u], p))
                    for u in node.inputs
                },
                node.arrival[p],
            )
            for p in range(periods)
        ]
        node.lags = {u: None for u in node.inputs}
        node.lags.update(forecasts.edge_lags(history, percent=lag_percent))


def utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


class SimWorld:
    """The simulation as the model sees it at ``now``: what has arrived or failed."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.now = 0

    def partition(self, dataset: int, key: int) -> forecasts.PartitionState:
        node = self.nodes[dataset]
        end = node.period_end(key)
        arrival = node.arrival[key]
        own = node.own[WEEKDAYS[weekday(end)]]
        if arrival <= self.now:
            return forecasts.PartitionState(end, forecasts.READY, arrival, own=own)
        failed = node.fail_at.get(key)
        if failed is not None and failed <= self.now:
            return forecasts.PartitionState(end, forecasts.FAILED)
        return forecasts.PartitionState(
            end,
            forecasts.AWAITED,
            deadline=end + node.deadline_offset,
            own=own,
        )

    def upstreams(self, dataset: int, key: int):
        node = self.nodes[dataset]
        for u in node.inputs:
            up = self.nodes[u]
            yield forecasts.Upstream(u, tuple(node.covering(up, key)), node.lags[u])


def replay(
    nodes: list[Node],
    *,
    cadence: int,
    use_lineage: bool,
    max_depth: int,
    overdue_percent: int = forecasts.DEFAULT_OVERDUE_PERCENT,
    past_p99_percent: int = forecasts.DEFAULT_PAST_P99_PERCENT,
) -> dict:
    """Every ``cadence`` seconds of the replay days, forecast each awaited partition
    before its deadline; returns the first warning per partition."""
    world = SimWorld(nodes)
    start, stop = T0 + HISTORY_DAYS * DAY, T0 + (HISTORY_DAYS + REPLAY_DAYS) * DAY
    # Partitions whose watch window [period end, min(arrival, deadline)) is in the replay.
    windows: list[tuple[int, int, int, int]] = []
    for node in nodes:
        per_day = 24 if node.hourly else 1
        for p in range(HISTORY_DAYS * per_day, (HISTORY_DAYS + REPLAY_DAYS) * per_day):
            end = node.period_end(p)
            closes = min(node.arrival[p], end + node.deadline_offset)
            if end < closes and end < stop:
                windows.append((end, closes, node.index, p))
    windows.sort()
    warnings: dict[tuple[int, int], tuple[int, forecasts.Estimate]] = {}
    active: list[tuple[int, int, int, int]] = []
    cursor = 0
    for now in range(start, stop, cadence):
        world.now = now
        while cursor < len(windows) and windows[cursor][0] <= now:
            active.append(windows[cursor])
            cursor += 1
        active = [w for w in active if w[1] > now and (w[2], w[3]) not in warnings]
        forecaster = forecasts.Forecaster(
            world,
            now,
            max_depth=max_depth,
            use_lineage=use_lineage,
            overdue_percent=overdue_percent,
            past_p99_percent=past_p99_percent,
        )
        for _, _, dataset, p in active:
            node = nodes[dataset]
            found = forecaster.estimate(dataset, p)
            if found.at_risk(node.period_end(p) + node.deadline_offset):
                warnings[(dataset, p)] = (now, found)
    return warnings


def score(nodes: list[Node], warnings: dict) -> dict:
    late: dict[tuple[int, int], str] = {}
    classes: dict[tuple[int, int], str] = {}
    for node in nodes:
        per_day = 24 if node.hourly else 1
        for p in range(HISTORY_DAYS * per_day, (HISTORY_DAYS + REPLAY_DAYS) * per_day):
            kind = node.cause[p] or NOISE
            classes[(node.index, p)] = kind
            if node.arrival[p] > node.period_end(p) + node.deadline_offset:
                late[(node.index, p)] = kind

    def figures(keys_late: set, keys_warned: set) -> dict:
        right = keys_late & keys_warned
        leads = [
            (nodes[d].period_end(p) + nodes[d].deadline_offset - warnings[(d, p)][0]) / MIN
            for d, p in right
        ]
        return {
            "late": len(keys_late),
            "warned": len(keys_warned),
            "warned_and_late": len(right),
            "recall": round(len(right) / len(keys_late), 3) if keys_late else None,
            "precision": round(len(right) / len(keys_warned), 3) if keys_warned else None,
            "median_lead_minutes": round(statistics.median(leads), 1) if leads else None,
        }

    result = {"all": figures(set(late), set(warnings))}
    for kind in (UPSTREAM_DELAY, OWN_DELAY, FAILURE, NOISE):
        result[kind] = figures(
            {k for k, c in late.items() if c == kind},
            {k for k in warnings if classes[k] == kind},
        )
    return result


def grouping(nodes: list[Node], *, hold_after_upstream: int) -> dict:
    """Pages for the replayed late partitions, without and with holds (one late root, one
    page), by the watchdog's rule (``watchdog.holds``), every dataset watched with its
    deadline and no grace:

    - without: every late partition pages at its deadline;
    - with: a late partition whose input has an open incident for a partition it needs
      (that input's partition is late by its own deadline, judged by then, and still
      missing) is held; it pages ``hold_after_upstream`` seconds after such an
      incident resolves (``WATCHDOG_HOLD_AFTER_UPSTREAM``: its run's time to catch up)
      when none is open then and it is still missing (released), or never, when it lands
      first (resolved silently).

    Independent causes: a late partition whose needed input partitions were all on time
    by their own deadlines (no upstream incident ever opened for them). Each must page at
    its deadline: ``independent_suppressed`` counts those that did not (must be 0).
    """
    per_day = {n.index: 24 if n.hourly else 1 for n in nodes}

    def deadline(node: Node, p: int) -> int:
        return node.period_end(p) + node.deadline_offset

    def late(node: Node, p: int) -> bool:
        return node.arrival[p] > deadline(node, p)

    without = paged = released = silent = 0
    independent = independent_suppressed = own_cause_held = own_cause_silent = 0
    for node in nodes:
        first, stop = (
            HISTORY_DAYS * per_day[node.index],
            (HISTORY_DAYS + REPLAY_DAYS) * per_day[node.index],
        )
        for p in range(first, stop):
            if not late(node, p):
                continue
            without += 1
            judged = deadline(node, p)
            # The needed input partitions that open an incident (late by their deadline).
            incidents = [
                (deadline(nodes[u], k), nodes[u].arrival[k])
                for u in node.inputs
                for k in node.covering(nodes[u], p)
                if late(nodes[u], k)
            ]

            def open_at(t: int, incidents=incidents) -> bool:
                return any(opened <= t < resolved for opened, resolved in incidents)

            if not incidents:
                independent += 1
            if not open_at(judged):
                paged += 1
                continue
            if not incidents:
                independent_suppressed += 1
            own = node.cause[p] == OWN_DELAY or p in node.fail_at  # its own incident too
            # Released the hold after an upstream recovery, when none is open then (a
            # release re-holds under an incident still open, as the watchdog does).
            release = next(
                (
                    t + hold_after_upstream
                    for t in sorted(r for _, r in incidents)
                    if t + hold_after_upstream >= judged and not open_at(t + hold_after_upstream)
                ),
                None,
            )
            if release is not None and release < node.arrival[p]:
                released += 1
                own_cause_held += own
            else:
                silent += 1
                own_cause_silent += own
    with_holds = paged + released
    return {
        "pages_without_grouping": without,
        "pages_with_grouping": with_holds,
        "paged_at_deadline": paged,
        "held_then_released": released,
        "held_then_resolved_silently": silent,
        "reduction_ratio": round(without / with_holds, 2) if with_holds else None,
        "pages_saved_share": round(1 - with_holds / without, 3) if without else None,
        "independent_causes": independent,
        "independent_suppressed": independent_suppressed,
        # Own delay or failure while an input was late as well: held, then paged on
        # release, or never when the upstream recovered after it landed.
        "own_cause_held_then_released": own_cause_held,
        "own_cause_held_then_resolved_silently": own_cause_silent,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--cadence-minutes", type=int, default=5)
    parser.add_argument("--lag-percent", type=int, default=forecasts.DEFAULT_LAG_PERCENT)
    parser.add_argument("--max-depth", type=int, default=forecasts.DEFAULT_MAX_DEPTH)
    parser.add_argument("--overdue-percent", type=int, default=forecasts.DEFAULT_OVERDUE_PERCENT)
    parser.add_argument("--past-p99-percent", type=int, default=forecasts.DEFAULT_PAST_P99_PERCENT)
    # The watchdog's WATCHDOG_HOLD_AFTER_UPSTREAM default (1800 s).
    parser.add_argument("--hold-after-upstream-minutes", type=int, default=30)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "forecast.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    rng = random.Random(args.seed)
    nodes = build_graph(rng)
    days = HISTORY_DAYS + REPLAY_DAYS
    incidents = inject_incidents(nodes, rng, days)
    simulate(nodes, incidents, rng, days)
    learn(nodes, lag_percent=args.lag_percent)
    simulated = time.perf_counter() - started
    runs = {}
    for name, use_lineage in (("forecast", True), ("baseline_own_profile_only", False)):
        began = time.perf_counter()
        warnings = replay(
            nodes,
            cadence=args.cadence_minutes * MIN,
            use_lineage=use_lineage,
            max_depth=args.max_depth,
            overdue_percent=args.overdue_percent,
            past_p99_percent=args.past_p99_percent,
        )
        runs[name] = score(nodes, warnings) | {"seconds": round(time.perf_counter() - began, 1)}
    model, base = runs["forecast"], runs["baseline_own_profile_only"]

    def ratio(a, b):
        return round(a / b, 2) if a is not None and b else None

    target = model[UPSTREAM_DELAY]
    report = {
        "graph": {
            "datasets": len(nodes),
            "hourly": sum(n.hourly for n in nodes),
            "edges": sum(len(n.inputs) for n in nodes),
            "layers": len(LAYERS),
            "scheduled_jobs": sum(n.kind == "scheduled" for n in nodes),
        },
        "days": {"history": HISTORY_DAYS, "replay": REPLAY_DAYS},
        "incidents": {
            "delays": sum(1 for v in incidents.values() if v[0] == "delay"),
            "failures": sum(1 for v in incidents.values() if v[0] == "failure"),
        },
        "cadence_minutes": args.cadence_minutes,
        "model": {
            "lag_percent": args.lag_percent,
            "max_depth": args.max_depth,
            "overdue_percent": args.overdue_percent,
            "past_p99_percent": args.past_p99_percent,
            "min_periods": MIN_PERIODS,
        },
        "runs": runs,
        "ratio_forecast_over_baseline": {
            kind: {
                "recall": ratio(model[kind]["recall"], base[kind]["recall"]),
                "precision": ratio(model[kind]["precision"], base[kind]["precision"]),
            }
            for kind in ("all", UPSTREAM_DELAY)
        },
        "targets": {
            "recall_upstream_delay": {"target": 0.8, "value": target["recall"]},
            "precision_upstream_delay": {"target": 0.8, "value": target["precision"]},
            "median_lead_minutes": {"target": 30, "value": target["median_lead_minutes"]},
        },
        "met": bool(
            (target["recall"] or 0) >= 0.8
            and (target["precision"] or 0) >= 0.8
            and (target["median_lead_minutes"] or 0) >= 30
        ),
        "seconds": {"simulate_and_learn": round(simulated, 1)},
        "grouping": grouping(nodes, hold_after_upstream=args.hold_after_upstream_minutes * MIN)
        | {"hold_after_upstream_minutes": args.hold_after_upstream_minutes},
    }
    print(f"{'':18} {'late':>6} {'warned':>6} {'recall':>7} {'precision':>9} {'lead min':>8}")
    for name, run in runs.items():
        print(name)
        for kind in ("all", UPSTREAM_DELAY, OWN_DELAY, FAILURE, NOISE):
            f = run[kind]
            print(
                f"  {kind:16} {f['late']:6} {f['warned']:6} {f['recall']!s:>7} "
                f"{f['precision']!s:>9} {f['median_lead_minutes']!s:>8}"
            )
    print(json.dumps(report["ratio_forecast_over_baseline"]))
    print(json.dumps(report["targets"]), "met" if report["met"] else "NOT met")
    groups = report["grouping"]
    print(
        f"pages without grouping {groups['pages_without_grouping']}, with "
        f"{groups['pages_with_grouping']} (reduction x{groups['reduction_ratio']}); "
        f"independent causes {groups['independent_causes']}, suppressed "
        f"{groups['independent_suppressed']}"
    )
    print(json.dumps(groups))
    if groups["independent_suppressed"]:
        print("FAILED: a page for an independent cause was suppressed")
        report["met"] = False
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
