"""The embedded demo's month (``lineage.demo.load``, what ``load_demo`` runs) and the
watchdog's replay of it: the documented state at a Tuesday afternoon; a state consistent
with the freshness rules at any instant (``TIDEMARK_DEMO_EXAMPLES`` random ones, 2 by
default, and the edges); dead letters replayable; ``load_demo`` and
``load_watchdog_demo`` keep what a first run loaded."""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import Count, Min, Q
from django.test import override_settings
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from catalog import (
    browse,
    change_notices,
    endpoint_actions,
    freshness_state,
    selectors,
    success_counts,
)
from catalog.demo import feed, world
from catalog.demo.history import history_start
from catalog.models import (
    ChangeNotice,
    Dataset,
    Delivery,
    Endpoint,
    EndpointSuccessHour,
    LatePartition,
    Notification,
    Partition,
    PartitionRevision,
    Subscription,
)
from lineage import demo
from lineage.models import LineageEvent, LineageRun
from tests.demo_seed import DEMO_HOOK_URL, embedded_demo_settings, load_like_make_run
from watchdog import demo as watchdog_demo
from watchdog.models import Incident, Monitor, Operator, Page

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

NOW = datetime(2026, 12, 1, 16, 48, tzinfo=UTC)  # a Tuesday afternoon
SEED = 17
EXAMPLES = int(os.environ.get("TIDEMARK_DEMO_EXAMPLES", "2"))
# What the catalog page and /freshness say of each dataset at NOW.
STATES = {
    "raw/orders": "fresh",
    "raw/payments": "fresh",
    "raw/shipments": "fresh",
    "analytics.public.orders_rollup": "fresh",
    "finance.public.daily_revenue": "late",
    "finance.public.monthly_close": "fresh",
    "reference/currencies": "no_sla",
    "exports/orders_v1": "no_sla",
}


@pytest.fixture
def demo_settings(settings, tmp_path):
    return embedded_demo_settings(settings, tmp_path / "var")


@pytest.fixture
def loaded(demo_settings):
    return demo.load(now=NOW, seed=SEED, demo_hook_url=DEMO_HOOK_URL)


def by_name(spec: world.DatasetSpec) -> Dataset:
    return Dataset.objects.get(namespace=spec.namespace, name=spec.name)


def test_the_demo_month_is_the_documented_one(loaded):
    datasets = list(browse.dataset_rows(now=NOW))
    page_states = browse.rows_freshness(datasets, now=NOW)
    for dataset in datasets:
        state = freshness_state.dataset_freshness(dataset, now=NOW)
        # The catalog page judges each badge as /freshness does.
        assert page_states[dataset.pk] == state, dataset
        assert state.state == STATES[dataset.name], dataset
    revenue = freshness_state.dataset_freshness(by_name(world.DAILY_REVENUE), now=NOW)
    assert (revenue.partition_due, revenue.latest_ready) == ("2026-11-30", "2026-11-29")

    assert Counter(
        Partition.objects.values_list("dataset__name", "current_revision__detected_by")
    ) == {
        ("raw/orders", "event"): 28,
        ("raw/orders", "poll"): 2,  # their readiness events were lost
        ("raw/payments", "poll"): 721,  # a month of hours, poll-only
        ("raw/shipments", "event"): 30,
        ("analytics.public.orders_rollup", "event"): 30,
        ("finance.public.daily_revenue", "event"): 31,  # Monday's never came
        ("finance.public.monthly_close", "event"): 1,
        ("reference/currencies", "event"): 1,  # five weekly snapshots, one partition
        ("exports/orders_v1", "event"): 1,
    }
    restated = Partition.objects.annotate(n=Count("revisions")).filter(n__gt=1)
    assert Counter(restated.values_list("dataset__name", "current_revision__version")) == {
        ("raw/orders", "rerun-2"): 1,
        ("analytics.public.orders_rollup", "v2"): 7,  # a promoted restatement
        # Unpartitioned: each version is a new snapshot (the newest one is current).
        ("reference/currencies", "2026-W49"): 1,
        ("exports/orders_v1", "2026-W47"): 1,
    }
    (pending,) = Partition.objects.filter(
        current_revision__metadata__poll__reason="2 of 3 expected files present"
    ).values_list("key", flat=True) or [None]
    assert pending is None  # the incomplete manifest completed, late
    assert sorted(
        LatePartition.objects.values_list("dataset__name", "partition_key", "recovered_at")
        .filter(recovered_at__isnull=True)
        .values_list("dataset__name", "partition_key")
    ) == [("finance.public.daily_revenue", "2026-11-30")]
    assert Counter(LatePartition.objects.values_list("dataset__name", flat=True)) == {
        "raw/orders": 2,
        "raw/payments": 1,
        "raw/shipments": 1,
        "analytics.public.orders_rollup": 1,
        "finance.public.daily_revenue": 2,
    }
    assert Counter(Notification.objects.values_list("type", flat=True)) == {
        "partition.ready": 851,
        "partition.restated": 1,
        "dataset.late": 7,
        "dataset.recovered": 6,
        "dataset.version_promoted": 1,
        "change_notice.announced": 3,
        "change_notice.effective": 1,
        "watchdog.monitor": 2,
        "watchdog.ping": 31,
    }
    failing = Endpoint.objects.get(url=world.FAILING_WEBHOOK)
    assert Counter(failing.deliveries.values_list("state", flat=True)) == {
        "succeeded": 5,
        "dead": 7,
        "retrying": 15,
    }
    # Its first failure: the first hourly delivery after it began failing, 20 hours ago.
    since = NOW - world.FAILING_FOR
    assert failing.is_active and since <= failing.failing_since < since + timedelta(hours=1)
    others = Delivery.objects.exclude(endpoint=failing)
    assert set(others.values_list("state", flat=True)) == {"succeeded"}
    assert LineageRun.objects.count() == 28  # four jobs, a week of runs each
    assert set(LineageEvent.objects.values_list("state", "verified")) == {("processed", True)}


def test_the_demo_month_feeds_governance_and_leaves_a_notice_to_acknowledge(loaded):
    undeclared = [
        (u.team.slug, u.job.name, u.dataset.name) for u in selectors.undeclared_reads_list()
    ]
    assert undeclared == [("analytics", "shipping_delays", "raw/shipments")]
    stale = selectors.stale_declarations_list(days=30, now=NOW)
    assert [(s.team.slug, s.dataset.name) for s in stale] == [
        ("analytics", "finance.public.daily_revenue")
    ]
    assert [
        (row["dataset_namespace"], row["dataset_name"])
        for row in selectors.uncatalogued_datasets_list()
    ] == [lineage_scratch()]
    assert not browse.critical_without_monitor(team=None).exists()
    notice = ChangeNotice.objects.get(dataset=by_name(world.DAILY_REVENUE))
    assert notice.state == "announced" and notice.require_acknowledgements
    assert [t.slug for t in change_notices.pending_teams(notice)] == ["analytics"]
    export = by_name(world.ORDERS_EXPORT)
    assert export.lifecycle == "deprecated" and export.sunset_at > NOW
    assert export.change_notices.get().state == "effective"


def test_the_demo_month_counts_each_endpoints_successes_per_hour(loaded):
    """The team page's health reads the hourly counters: the settled outbox keeps them
    as the workers would, one per endpoint and hour a delivery succeeded in."""
    succeeded = Delivery.objects.filter(state="succeeded")
    expected = Counter(
        (d.endpoint_id, success_counts.hour_of(d.finished_at))
        for d in succeeded.only("endpoint_id", "finished_at")
    )
    assert expected
    counted = {
        (row.endpoint_id, row.hour): row.succeeded for row in EndpointSuccessHour.objects.all()
    }
    assert counted == dict(expected)
    failing = Endpoint.objects.get(url=world.FAILING_WEBHOOK)
    (health,) = [
        e for e in selectors.endpoint_list(team=failing.team, now=NOW) if e.pk == failing.pk
    ]
    since = success_counts.health_window_start(NOW)
    assert health.n_succeeded == succeeded.filter(endpoint=failing, finished_at__gte=since).count()


def lineage_scratch() -> tuple[str, str]:
    return demo.SCRATCH


def test_the_demo_dead_letters_are_replayable(loaded):
    dead = list(Delivery.objects.filter(endpoint__url=world.FAILING_WEBHOOK, state="dead"))
    assert dead and all(
        d.attempts == django_settings.TIDEMARK_DELIVERY["max_attempts"] for d in dead
    )
    listed = selectors.delivery_list(team=loaded.teams["analytics"], state="dead_letter")
    assert {d.pk for d in listed} == {d.pk for d in dead}
    replayed = endpoint_actions.delivery_replay(delivery=dead[0], now=NOW)
    assert (replayed.state, replayed.attempts_before_replay) == ("pending", replayed.attempts)
    assert (
        endpoint_actions.endpoint_replay_dead_letters(endpoint=dead[0].endpoint, now=NOW)
        == len(dead) - 1
    )


def test_the_watchdog_replays_the_demo_feed_with_its_incidents(loaded):
    document = feed.watchdog_feed_events(loaded, seed=SEED)

    replayed = watchdog_demo.replay(document)

    data = Monitor.objects.get(name__endswith="daily_revenue data")
    pipeline = Monitor.objects.get(name__endswith="daily_revenue pipeline")
    assert (data.state, pipeline.state) == ("down", "down")
    [(partition, deadline)] = data.incidents.filter(resolved_at__isnull=True).values_list(
        "partition", "deadline_at"
    )
    # The catalog's open late incident, seen by the watchdog at the same deadline.
    late = LatePartition.objects.get(recovered_at__isnull=True)
    assert (partition, deadline) == (late.partition_key, late.deadline_at)
    resolved = data.incidents.get(resolved_at__isnull=False)
    assert resolved.partition == "2026-11-21"  # the late day: paged, then resolved
    assert set(resolved.pages.values_list("action", "state")) == {
        ("trigger", "sent"),
        ("resolve", "sent"),
    }
    assert set(pipeline.incidents.values_list("reason", "resolved_at")) == {
        (Incident.Reason.FAILED, None),
        (Incident.Reason.MISSED, None),
    }
    assert not Page.objects.exclude(state=Page.State.SENT).exists()
    assert data.pings.count() == 31 and pipeline.runs.count() == 30
    assert (
        Monitor.objects.filter(name__in=["orders nightly export", "analytics hourly sync"]).count()
        == 2
    )
    assert replayed.pages == Page.objects.count()
    assert watchdog_demo.replay(document).events == 0  # once only


@hypothesis_settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    now=st.datetimes(
        min_value=datetime(2026, 6, 1), max_value=datetime(2028, 6, 1), timezones=st.just(UTC)
    )
)
@example(now=datetime(2026, 11, 30, 13, 10, tzinfo=UTC))  # Monday, inside the grace
@example(now=datetime(2027, 3, 28, 1, 30, tzinfo=UTC))  # Berlin springs forward
@example(now=datetime(2027, 1, 1, 0, 2, tzinfo=UTC))  # a month and an hour close
def test_the_demo_month_agrees_with_the_freshness_rules_at_any_instant(demo_settings, now):
    lake = tempfile.mkdtemp(prefix="demo-lake-")
    with (
        override_settings(TIDEMARK_STORAGE_SOURCES={"local": {"url": f"file://{lake}"}}),
        transaction.atomic(),
    ):
        demo.load(now=now, seed=SEED, demo_hook_url=DEMO_HOOK_URL)
        for dataset in Dataset.objects.all():
            _agrees_with_the_freshness_rules(dataset, now=now)
        _hours_present_up_to_the_last_closed_one(now)
        assert not Delivery.objects.filter(
            state__in=("pending", "retrying"), next_attempt_at__lte=now
        ).exists()
        assert not Endpoint.objects.filter(is_active=False).exists()
        transaction.set_rollback(True)


def _agrees_with_the_freshness_rules(dataset: Dataset, *, now: datetime) -> None:
    """The oracle: every deadline judged since registration found exactly the partitions
    missing then (one late incident each, open while still missing), nothing ready before
    registration or after ``now``, no period in the future, and the dataset is late
    exactly when the world says it is."""
    start = history_start(now)
    assert start - timedelta(hours=1) <= dataset.created_at < start
    revisions = PartitionRevision.objects.filter(partition__dataset=dataset, state="ready")
    assert not revisions.filter(Q(ready_at__lt=dataset.created_at) | Q(ready_at__gt=now)).exists()
    assert not dataset.partitions.filter(start_at__gt=now).exists()
    sla = freshness_state.sla_of(dataset)
    if sla is None:
        return
    first_ready = dict(
        dataset.partitions.annotate(
            first=Min("revisions__ready_at", filter=Q(revisions__restatement__isnull=True))
        ).values_list("key", "first")
    )
    ready_now = set(
        dataset.partitions.filter(current_revision__state="ready").values_list("key", flat=True)
    )
    late = {row.partition_key: row for row in dataset.late_partitions.all()}
    expected_late = set()
    deadline = sla.next_deadline(dataset.created_at)
    while sla.late_after(deadline) <= now:
        for period in sla.due_at(deadline):
            arrived = first_ready.get(period.key)
            if arrived is None or arrived > sla.late_after(deadline):
                expected_late.add(period.key)
                assert late[period.key].deadline_at == deadline, (dataset, period.key)
        deadline = sla.next_deadline(deadline)
    assert set(late) == expected_late, dataset
    for key, row in late.items():
        assert (row.recovered_at is None) == (key not in ready_now), (dataset, key)
    state = freshness_state.dataset_freshness(dataset, now=now)
    is_late = any(row.recovered_at is None for row in late.values())
    assert (state.state == "late") == is_late, (dataset, state)
    assert is_late == (dataset.name == world.DAILY_REVENUE.name), (dataset, state)


def _hours_present_up_to_the_last_closed_one(now: datetime) -> None:
    """Every hour of the hourly dataset that closed more than its landing time ago (a
    few minutes) is there and ready; none is missing in the month."""
    payments = by_name(world.RAW_PAYMENTS)
    keys = set(
        payments.partitions.filter(current_revision__state="ready").values_list("key", flat=True)
    )
    hour = (now - timedelta(minutes=7)).replace(minute=0, second=0, microsecond=0)
    for back in range(24 * 29):
        start = hour - timedelta(hours=back + 1)
        assert start.strftime("%Y-%m-%dT%H") in keys, start


def test_load_demo_and_the_watchdog_demo_keep_what_a_first_run_loaded(demo_settings, monkeypatch):
    started = time.perf_counter()
    first = load_like_make_run(monkeypatch)
    took = time.perf_counter() - started
    print(f"load_demo and load_watchdog_demo took {took:.1f} s")
    counts = _counts()

    second = load_like_make_run(monkeypatch)

    assert second == {
        **first,
        "watchdog": "operator oncall; replayed 0 events, 0 judgements, 0 pages",
    }
    assert _counts() == counts
    assert first["watchdog"].startswith("operator oncall; replayed ")
    for name in ("demo-api-key", "demo-login", "demo-oncall-login", "demo-watchdog-feed.json"):
        assert oct((demo_settings / name).stat().st_mode & 0o777) == "0o600", name
    assert Operator.objects.get(username="oncall").all_labels

    # Started on another port: the demo's webhooks are declared anew there (a declaration
    # never moves a subscription to another URL, so each is deleted and declared again).
    monkeypatch.setenv("TIDEMARK_PORT", "8123")
    load_like_make_run(monkeypatch)
    hooks = Subscription.objects.filter(endpoint__url__contains="/demo/hooks/")
    assert hooks.exists()
    assert all(":8123/demo/hooks/" in s.endpoint.url for s in hooks.select_related("endpoint"))
    assert Subscription.objects.count() == counts["Subscription"]


def _counts() -> dict[str, int]:
    models = [Dataset, Partition, PartitionRevision, Notification, Delivery, Subscription]
    counts = {model.__name__: model.objects.count() for model in models}
    counts.update(monitors=Monitor.objects.count(), incidents=Incident.objects.count())
    return counts
