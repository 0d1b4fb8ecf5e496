"""The governance page: the API's reports, every team's for governance staff, one's own
teams' for everyone else."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from catalog.models import Endpoint, Notification, Subscription
from tests.catalog.factories import DatasetFactory, TeamFactory
from tests.web.helpers import dead_letter, observe

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(orders, analytics):
    """analytics reads orders' dataset undeclared and writes it; finance reads it too;
    orders owns a critical dataset without SLA and one without a monitor."""
    finance = TeamFactory(slug="finance")
    raw = DatasetFactory(owner=orders, name="raw/orders")
    observe(analytics, "rollup", raw)
    observe(finance, "board", raw)
    observe(analytics, "fixup", raw, "write")
    observe(analytics, "rollup", ("s3://scratch", "tmp/rollup"), "write")
    DatasetFactory(owner=orders, name="critical/no_sla", criticality="critical", sla_cron="")
    unwatched = DatasetFactory(
        owner=orders, name="critical/unwatched", criticality="critical", sla_cron="0 6 * * *"
    )
    watched = DatasetFactory(
        owner=analytics, name="critical/watched", criticality="critical", sla_cron="0 6 * * *"
    )
    monitor = dead_letter(
        Endpoint.objects.create(team=analytics, kind="watchdog", url="http://watchdog"),
        state="succeeded",
    )
    Notification.objects.filter(pk=monitor.notification_id).update(
        dataset=watched, type=Notification.Type.WATCHDOG_MONITOR
    )
    return {"raw": raw, "unwatched": unwatched, "finance": finance}


def report(response, name):
    return response.context[name]


def test_governance_staff_see_every_teams_rows(world, make_person, client_as):
    client = client_as(make_person("gov", is_staff=True))
    response = client.get("/governance/")
    assert response.status_code == 200
    assert {u.team.slug for u in report(response, "undeclared_reads")} == {"analytics", "finance"}
    assert [u.job.name for u in report(response, "undeclared_writes")] == ["fixup"]
    assert [r["dataset_name"] for r in report(response, "uncatalogued")] == ["tmp/rollup"]
    assert [d.name for d in report(response, "without_sla")] == ["critical/no_sla"]
    assert [d.name for d in report(response, "without_monitor")] == ["critical/unwatched"]
    body = response.content.decode()
    assert "every team&#x27;s rows" in body or "every team's rows" in body


def test_a_permission_makes_governance_staff_too(world, make_person, client_as):
    person = make_person("perm")
    person.user_permissions.add(Permission.objects.get(codename="view_datasetusage"))
    response = client_as(person).get("/governance/", {"team": "finance"})
    assert {u.team.slug for u in report(response, "undeclared_reads")} == {"finance"}


def test_others_see_their_own_teams_rows_only(world, make_person, client_as, analytics):
    client = client_as(make_person("ana", analytics))
    response = client.get("/governance/")
    assert {u.team.slug for u in report(response, "undeclared_reads")} == {"analytics"}
    assert report(response, "without_sla") == [] and report(response, "without_monitor") == []
    assert client.get("/governance/", {"team": "finance"}).status_code == 403


def test_stale_declarations_are_listed(world, make_person, client_as, analytics):
    subscription = Subscription.objects.create(team=analytics, dataset=world["unwatched"])
    Subscription.objects.filter(pk=subscription.pk).update(created_at="2020-01-01T00:00Z")
    response = client_as(make_person("ana", analytics)).get("/governance/")
    assert [s.dataset.name for s in report(response, "stale")] == ["critical/unwatched"]


def test_a_person_without_team_sees_no_rows(world, make_person, client_as):
    response = client_as(make_person("nobody")).get("/governance/")
    assert response.status_code == 200 and response.context["none"]


def test_unknown_team_for_governance_staff_is_404(make_person, client_as):
    assert (
        client_as(make_person("gov", is_staff=True))
        .get("/governance/", {"team": "ghost"})
        .status_code
        == 404
    )


def test_governance_page_query_count_is_bounded(
    world, make_person, client_as, django_assert_max_num_queries
):
    client = client_as(make_person("gov", is_staff=True))
    with django_assert_max_num_queries(15):  # one per report
        assert client.get("/governance/").status_code == 200


def test_unannounced_breaking_changes_are_listed_for_the_owner_and_staff(
    world, make_person, client_as, orders, analytics
):
    from datetime import UTC, datetime, timedelta

    from catalog.actors import Actor
    from catalog.services import publishing

    raw = world["raw"]
    before = datetime(2026, 11, 1, 6, 0, tzinfo=UTC)
    for day, fields in (
        (0, [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "numeric"}]),
        (1, [{"name": "id", "type": "bigint"}]),  # amount dropped, no notice
    ):
        at = before + timedelta(days=day)
        publishing.readiness_publish(
            actor=Actor(team=orders, username="ci"),
            namespace=raw.namespace,
            name=raw.name,
            partition=at.date().isoformat(),
            metadata={"schema": {"fields": fields}},
            now=at,
        )
    staff = client_as(make_person("gov", is_staff=True)).get("/governance/")
    [change] = report(staff, "unannounced_breaking_changes")
    assert (change.dataset, change.removed) == (raw, ["amount"])
    assert 'id="unannounced-breaking-changes"' in staff.content.decode()
    owner = client_as(make_person("olga", orders)).get("/governance/")
    assert [c.dataset for c in report(owner, "unannounced_breaking_changes")] == [raw]
    reader = client_as(make_person("ana", analytics)).get("/governance/")
    assert report(reader, "unannounced_breaking_changes") == []


def test_a_wide_breaking_change_shows_ten_columns_of_each_kind_then_a_count(
    world, make_person, client_as, orders
):
    from datetime import UTC, datetime, timedelta

    from catalog.actors import Actor
    from catalog.services import publishing

    raw = world["raw"]
    before = datetime(2026, 11, 1, 6, 0, tzinfo=UTC)
    wide = [{"name": f"c{n:02}", "type": "int"} for n in range(30)]
    narrow = [{"name": f"c{n:02}", "type": "text"} for n in range(12)]  # 12 retyped, 18 gone
    for day, fields in ((0, wide), (1, narrow)):
        at = before + timedelta(days=day)
        publishing.readiness_publish(
            actor=Actor(team=orders, username="ci"),
            namespace=raw.namespace,
            name=raw.name,
            partition=at.date().isoformat(),
            metadata={"schema": {"fields": fields}},
            now=at,
        )
    body = client_as(make_person("gov", is_staff=True)).get("/governance/").content.decode()
    section = body.split('id="unannounced-breaking-changes"')[1]
    assert ", ".join(f"c{n:02}" for n in range(12, 22)) in section
    assert "c22" not in section and "and 8 more" in section
    assert section.count("int &rarr; text") == 10
    assert "c10: int" not in section and "and 2 more" in section


def test_datasets_needed_earlier_than_promised_are_listed(world, make_person, client_as):
    from catalog.actors import Actor
    from catalog.services.subscriptions import subscription_create

    subscription_create(
        actor=Actor(team=world["finance"]), dataset=world["unwatched"], need_by_cron="0 5 * * *"
    )
    response = client_as(make_person("gov", is_staff=True)).get("/governance/")
    [row] = report(response, "needed_earlier")
    assert (row.team, row.dataset, row.gap_minutes) == ("finance", world["unwatched"], 60)
    assert 'id="needed-earlier"' in response.content.decode()
