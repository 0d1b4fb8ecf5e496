"""Who needs a dataset by when: ``needed_by`` on the dataset API, and the governance
report of datasets needed earlier than their producers promise
(``/api/v1/reports/needed-earlier``)."""

from datetime import UTC, datetime

import pytest
import time_machine

from catalog.actors import Actor
from catalog.models import Subscription
from catalog.services.datasets import dataset_update
from catalog.services.subscriptions import subscription_create
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/reports/needed-earlier"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def producers():
    return TeamFactory(slug="producers")


@pytest.fixture
def orders(producers):
    # Daily partitions promised by 09:00 UTC the next day.
    return DatasetFactory(owner=producers, name="raw/orders", sla_cron="0 9 * * *")


def need(dataset, slug, cron, time_zone="UTC"):
    team = TeamFactory(slug=slug)
    return subscription_create(
        actor=Actor(team=team), dataset=dataset, need_by_cron=cron, need_by_timezone=time_zone
    ).subscription


def test_the_dataset_api_says_who_needs_it_by_when(client_for, team, orders):
    need(orders, "risk", "0 7 * * *", "Europe/Berlin")  # 06:00 UTC in winter
    need(orders, "finance", "0 10 * * *")
    subscription_create(actor=Actor(team=team), dataset=orders)  # no need-by: not listed
    body = client_for(team).get(f"/api/v1/datasets/{orders.id}").json()
    assert [(r["team"], r["earlier_than_sla"], r["gap_minutes"]) for r in body["needed_by"]] == [
        ("finance", False, -60),
        ("risk", True, 180),
    ]
    risk = body["needed_by"][1]
    assert risk["next_need_by"] == {
        "local": "2026-12-02T07:00:00+01:00",
        "utc": "2026-12-02T06:00:00Z",
    }
    assert (risk["sla_deadline_at"], risk["need_by_at"]) == (
        "2026-12-02T09:00:00Z",
        "2026-12-02T06:00:00Z",
    )
    assert risk["need_by_timezone"] == "Europe/Berlin" and risk["job"] is None


def test_without_an_sla_need_bys_are_shown_and_never_earlier(client_for, team):
    dataset = DatasetFactory(sla_cron="")
    need(dataset, "risk", "0 6 * * *")
    [row] = client_for(team).get(f"/api/v1/datasets/{dataset.id}").json()["needed_by"]
    assert row["earlier_than_sla"] is None and row["gap_minutes"] is None
    assert row["next_need_by"]["utc"] == "2026-12-02T06:00:00Z"


def test_the_report_lists_consumers_needing_data_before_it_is_promised(
    client_for, producers, orders
):
    need(orders, "risk", "0 6 * * *")
    need(orders, "finance", "0 10 * * *")  # after the SLA: not listed
    other = DatasetFactory(owner=TeamFactory(slug="web"), name="raw/clicks", sla_cron="0 8 * * *")
    need(other, "ads", "30 7 * * *")
    auditor = client_for(TeamFactory(slug="audit"), scopes=["governance"])
    rows = auditor.get(URL).json()["results"]
    assert [
        (r["dataset"]["name"], r["dataset"]["owner"], r["team"], r["gap_minutes"]) for r in rows
    ] == [
        ("raw/orders", "producers", "risk", 180),
        ("raw/clicks", "web", "ads", 30),
    ]
    assert (rows[0]["sla_deadline_at"], rows[0]["need_by_at"]) == (
        "2026-12-02T09:00:00Z",
        "2026-12-02T06:00:00Z",
    )
    # A team sees the rows it is party to, as producer or as consumer.
    assert [
        r["team"] for r in client_for(producers, scopes=["read"]).get(URL).json()["results"]
    ] == ["risk"]
    ads = Subscription.objects.get(team__slug="ads").team
    assert [
        r["dataset"]["name"] for r in client_for(ads, scopes=["read"]).get(URL).json()["results"]
    ] == ["raw/clicks"]
    assert client_for(producers, scopes=["read"]).get(URL, {"team": "web"}).status_code == 403


def test_an_sla_change_moves_a_dataset_in_and_out_of_the_report(client_for, producers, orders):
    need(orders, "finance", "0 10 * * *")
    auditor = client_for(TeamFactory(slug="audit"), scopes=["governance"])
    assert auditor.get(URL).json()["results"] == []
    dataset_update(actor=Actor(team=producers, username="p"), dataset=orders, sla_cron="0 11 * * *")
    [row] = auditor.get(URL).json()["results"]
    assert (row["team"], row["gap_minutes"]) == ("finance", 60)
    dataset_update(actor=Actor(team=producers, username="p"), dataset=orders, sla_cron="0 9 * * *")
    assert auditor.get(URL).json()["results"] == []


def test_the_report_query_count_does_not_grow_with_rows(
    client_for, orders, django_assert_max_num_queries
):
    for n in range(5):
        need(orders, f"team-{n}", "0 6 * * *")
    auditor = client_for(TeamFactory(slug="audit"), scopes=["governance"])
    with django_assert_max_num_queries(6):
        assert len(auditor.get(URL).json()["results"]) == 5
