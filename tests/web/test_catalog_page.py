"""The catalog page: filters, search, freshness badges and the latest ready partition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog import freshness_state
from catalog.models import Dataset, LatePartition, Partition, PartitionRevision
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def ready(dataset, key, *, state="ready", start=None):
    start = start or datetime.fromisoformat(key).replace(tzinfo=UTC)
    partition = Partition.objects.create(
        dataset=dataset, key=key, start_at=start, end_at=start + timedelta(days=1)
    )
    revision = PartitionRevision.objects.create(
        partition=partition, state=state, ready_at=NOW if state == "ready" else None
    )
    partition.current_revision = revision
    partition.save()
    return partition


@pytest.fixture
def catalog(orders, analytics):
    """Four datasets: fresh, late, no SLA, and a deprecated one of analytics."""
    sla = {"sla_cron": "0 6 * * *", "sla_timezone": "UTC"}
    fresh = DatasetFactory(owner=orders, name="raw/orders", criticality="high", **sla)
    late = DatasetFactory(owner=orders, name="raw/payments", criticality="critical", **sla)
    plain = DatasetFactory(
        owner=orders, namespace="postgres://wh:5432", name="wh.public.refunds", sla_cron=""
    )
    old = DatasetFactory(
        owner=analytics,
        name="marts/rollup",
        description="Daily order rollup",
        lifecycle="deprecated",
        **sla,
    )
    ready(fresh, "2026-11-26")
    ready(fresh, "2026-11-27")
    ready(late, "2026-11-25")
    ready(late, "2026-11-26", state="pending")
    LatePartition.objects.create(
        dataset=late,
        partition_key="2026-11-26",
        deadline_at=datetime(2026, 11, 27, 6, tzinfo=UTC),
        late_at=datetime(2026, 11, 27, 6, tzinfo=UTC),
    )
    return {"fresh": fresh, "late": late, "plain": plain, "old": old}


@pytest.fixture
def ada(make_person, client_as, orders):
    return client_as(make_person("ada", orders))


def rows_of(response) -> list[str]:
    return [dataset.name for dataset, _ in response.context["rows"]]


@time_machine.travel(NOW, tick=False)
def test_catalog_lists_every_dataset_with_badge_and_latest_ready_partition(ada, catalog):
    response = ada.get("/")
    assert response.status_code == 200
    states = {d.name: (f.state, f.latest_ready) for d, f in response.context["rows"]}
    assert states == {
        "raw/orders": ("fresh", "2026-11-27"),
        "raw/payments": ("late", "2026-11-25"),
        "wh.public.refunds": ("no_sla", None),
        "marts/rollup": ("awaiting", None),
    }
    body = response.content.decode()
    assert '<span class="badge late"' in body and "1 d 3 h" in body
    assert '<span class="badge no_sla">no SLA</span>' in body


@time_machine.travel(NOW, tick=False)
def test_a_future_partition_is_not_the_latest_ready_on_the_catalog_page(ada, catalog):
    """A forecast's partition (or one stored before future partitions were refused) is
    not the latest ready before its period starts."""
    ready(catalog["fresh"], "2026-11-29")
    ready(catalog["fresh"], "2027-06-01")
    ready(catalog["plain"], "2026-11-28", start=NOW)  # started this very instant
    rows = {d.name: f.latest_ready for d, f in ada.get("/").context["rows"]}
    assert (rows["raw/orders"], rows["wh.public.refunds"]) == ("2026-11-27", "2026-11-28")


@time_machine.travel(NOW, tick=False)
def test_catalog_badges_agree_with_the_api_freshness(ada, catalog):
    response = ada.get("/")
    for dataset, fresh in response.context["rows"]:
        assert fresh == freshness_state.dataset_freshness(dataset, now=timezone.now())


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"team": "analytics"}, ["marts/rollup"]),
        ({"namespace": "postgres://wh:5432"}, ["wh.public.refunds"]),
        ({"criticality": "critical"}, ["raw/payments"]),
        ({"lifecycle": "deprecated"}, ["marts/rollup"]),
        ({"freshness": "late"}, ["raw/payments"]),
        ({"freshness": "no_sla"}, ["wh.public.refunds"]),
        ({"freshness": "on_time"}, ["marts/rollup", "raw/orders"]),
        ({"q": "ROLLUP"}, ["marts/rollup"]),
        ({"q": "order rollup"}, ["marts/rollup"]),
        ({"team": "orders", "q": "pay"}, ["raw/payments"]),
    ],
)
def test_catalog_filters(ada, catalog, query, expected):
    assert sorted(rows_of(ada.get("/", query))) == expected


@time_machine.travel(NOW, tick=False)
def test_catalog_due_filter_lists_datasets_inside_their_grace(ada, orders):
    DatasetFactory(owner=orders, name="graced", sla_cron="0 6 * * *", sla_grace_seconds=4 * 3600)
    Dataset.objects.filter(name="graced").update(
        next_deadline_at=NOW - timedelta(hours=3), next_check_at=NOW + timedelta(hours=1)
    )
    assert rows_of(ada.get("/", {"freshness": "due"})) == ["graced"]


@time_machine.travel(NOW, tick=False)
def test_catalog_with_htmx_sends_only_the_table(ada, catalog):
    response = ada.get("/", {"team": "analytics"}, headers={"HX-Request": "true"})
    body = response.content.decode().replace("<wbr>", "")  # names may wrap between parts
    assert "<table" in body and "<html" not in body
    assert "marts/rollup" in body and "raw/orders" not in body


def test_catalog_is_paginated(ada, orders):
    Dataset.objects.bulk_create(
        [Dataset(namespace="s3://lake", name=f"t/{n:03}", owner=orders) for n in range(120)]
    )
    first = ada.get("/")
    assert len(first.context["rows"]) == 50
    assert "Page 1 of 3" in first.content.decode()
    last = ada.get("/", {"page": 3})
    assert rows_of(last) == [f"t/{n:03}" for n in range(100, 120)]


def test_catalog_ignores_unknown_filter_values(ada, catalog):
    response = ada.get("/", {"criticality": "nope", "team": "ghost"})
    assert response.status_code == 200
    assert len(response.context["rows"]) == 4


@pytest.mark.parametrize("htmx", [False, True])
def test_catalog_keeps_the_valid_filters_and_names_the_invalid_one(ada, catalog, htmx):
    headers = {"HX-Request": "true"} if htmx else {}
    response = ada.get("/", {"team": "nonexistent", "criticality": "high"}, headers=headers)
    assert response.status_code == 200
    assert rows_of(response) == ["raw/orders"]
    body = response.content.decode()
    assert "Ignored the team filter “nonexistent”" in body
    assert "criticality filter" not in body


def test_catalog_query_count_does_not_grow_with_rows(ada, orders, django_assert_max_num_queries):
    TeamFactory(slug="other")
    for n in range(30):
        dataset = DatasetFactory(owner=orders, name=f"t/{n}", sla_cron="0 6 * * *")
        ready(dataset, "2026-11-27")
    with django_assert_max_num_queries(9):
        assert len(ada.get("/").context["rows"]) == 30


def _unevaluated(orders, count, first=0):
    """``count`` datasets of each freshness, registered on the 25th and never evaluated
    since (beat stopped): late (nothing ever arrived), due (the 27th missing inside a
    four-hour grace), fresh, and awaiting (registered after today's deadline)."""
    made = []
    for n in range(first, first + count):
        for state, grace, registered in (
            ("late", 1800, datetime(2026, 11, 25, 12, tzinfo=UTC)),
            ("due", 4 * 3600, datetime(2026, 11, 27, 12, tzinfo=UTC)),
            ("fresh", 1800, datetime(2026, 11, 25, 12, tzinfo=UTC)),
            ("awaiting", 1800, datetime(2026, 11, 28, 7, tzinfo=UTC)),
        ):
            dataset = DatasetFactory(
                owner=orders,
                name=f"{state}/{n}",
                sla_cron="0 6 * * *",
                sla_grace_seconds=grace,
                next_deadline_at=freshness_state.sla_of(
                    Dataset(sla_cron="0 6 * * *", partitioning="daily")
                ).next_deadline(registered),
            )
            if state == "fresh":
                for key in ("2026-11-25", "2026-11-26", "2026-11-27"):
                    ready(dataset, key)
            made.append((state, dataset))
    return made


@time_machine.travel(NOW, tick=False)
def test_catalog_rows_and_filter_say_late_before_any_evaluation(ada, orders):
    made = _unevaluated(orders, 1)
    response = ada.get("/")
    rows = {d.name: f for d, f in response.context["rows"]}
    for state, dataset in made:
        detail = freshness_state.dataset_freshness(dataset, now=NOW)
        assert (rows[dataset.name], detail.state) == (detail, state)
    assert rows["late/0"].partition_due == "2026-11-25"  # the oldest missing one
    assert rows["due/0"].partition_due == "2026-11-27"
    for choice, names in (
        ("late", ["late/0"]),
        ("due", ["due/0"]),
        ("on_time", ["awaiting/0", "fresh/0"]),
    ):
        assert sorted(rows_of(ada.get("/", {"freshness": choice}))) == names, choice


@time_machine.travel(NOW, tick=False)
def test_catalog_freshness_query_count_is_constant_while_evaluations_lag(ada, orders):
    """Every row owes a judgement the evaluation has not made: the page and its
    freshness filter still cost the same queries for four rows as for twenty-four."""
    _unevaluated(orders, 1)
    counts = []
    for round_ in range(2):
        if round_:
            _unevaluated(orders, 5, first=1)  # six of each now
        for query in ({}, {"freshness": "late"}, {"freshness": "on_time"}):
            with CaptureQueriesContext(connection) as done:
                assert ada.get("/", query).status_code == 200
            counts.append(len(done.captured_queries))
    assert counts[:3] == counts[3:]
