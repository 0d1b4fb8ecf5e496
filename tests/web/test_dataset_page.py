"""The dataset page: what it shows, the owner's edit form, subscribing and acknowledging a
change notice, each through the services the API uses, and who may do what."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from catalog.models import (
    AuditEntry,
    ChangeNoticeAcknowledgement,
    Dataset,
    Endpoint,
    LatePartition,
    Partition,
    PartitionRevision,
    Subscription,
)
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.web.helpers import announce, observe

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def partition(dataset, key, *, ready_at=None, state="ready", detected_by="event", versions=1):
    start = datetime.fromisoformat(key).replace(tzinfo=UTC)
    row = Partition.objects.create(
        dataset=dataset, key=key, start_at=start, end_at=start + timedelta(days=1)
    )
    for n in range(versions):
        revision = PartitionRevision.objects.create(
            partition=row,
            version="" if n == 0 else f"v{n + 1}",
            state=state,
            # Each later version is ready an hour after the one before it.
            ready_at=ready_at + timedelta(hours=n) if state == "ready" else None,
            detected_by=detected_by,
        )
    row.current_revision = revision
    row.save()
    return row


@pytest.fixture
def orders_daily(orders):
    return DatasetFactory(
        owner=orders,
        namespace="s3://lake",
        name="curated/orders_daily",
        description="Orders per day.",
        sla_cron="30 6 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=1800,
        criticality="high",
    )


@pytest.fixture
def owner(make_person, client_as, orders):
    return client_as(make_person("olga", orders))


@pytest.fixture
def consumer(make_person, client_as, analytics):
    return client_as(make_person("ana", analytics))


def page(client, dataset, **params):
    response = client.get(f"/datasets/{dataset.pk}/", params)
    assert response.status_code == 200
    return response, response.content.decode()


@time_machine.travel(NOW, tick=False)
def test_dataset_page_shows_owner_sla_deadlines_and_freshness(consumer, orders_daily):
    response, body = page(consumer, orders_daily)
    assert "orders" in body and "Orders platform" in body
    assert "readiness event" in body  # the completion signal in words
    assert "At 06:30 every day, Europe/Berlin" in body
    # 06:30 Berlin is 05:30 UTC in winter; the next three deadlines from 09:00 UTC.
    assert [d["utc"] for d in response.context["deadlines"]] == [
        "2026-11-29 05:30",
        "2026-11-30 05:30",
        "2026-12-01 05:30",
    ]
    assert "Sun 2026-11-29 06:30 Europe/Berlin" in body


@time_machine.travel(NOW, tick=False)
def test_dataset_page_draws_the_last_30_periods(consumer, orders_daily):
    Dataset.objects.filter(pk=orders_daily.pk).update(created_at=NOW - timedelta(days=60))
    on_time = datetime(2026, 11, 27, 4, tzinfo=UTC)
    partition(orders_daily, "2026-11-26", ready_at=on_time)
    partition(orders_daily, "2026-11-25", ready_at=datetime(2026, 11, 26, 9, tzinfo=UTC))
    partition(orders_daily, "2026-11-24", ready_at=on_time - timedelta(days=3), versions=2)
    partition(orders_daily, "2026-11-23", ready_at=on_time - timedelta(days=4), detected_by="poll")
    LatePartition.objects.create(
        dataset=orders_daily,
        partition_key="2026-11-25",
        deadline_at=datetime(2026, 11, 26, 5, 30, tzinfo=UTC),
        late_at=datetime(2026, 11, 26, 6, 0, tzinfo=UTC),
        recovered_at=datetime(2026, 11, 26, 9, tzinfo=UTC),
    )
    response, body = page(consumer, orders_daily)
    cells = {c.key: c for c in response.context["cells"]}
    assert len(cells) == 30 and "2026-11-27" in cells and "2026-10-29" in cells
    assert cells["2026-11-26"].status == "on_time"
    # Late since deadline plus grace (05:30 UTC + 30 min), as the badge counts it.
    assert (cells["2026-11-25"].status, cells["2026-11-25"].late_seconds) == ("late", 10800)
    assert cells["2026-11-24"].restated and cells["2026-11-23"].by_poll
    assert cells["2026-11-22"].status == "missing"
    assert '<svg class="timeline"' in body
    lateness = "ready late by 3 h (deadline 2026-11-26 05:30 UTC + 30 min grace)"
    assert f"2026-11-25: {lateness}" in body
    assert body.count('class="restated"') == 1 and body.count('class="poll"') == 1
    assert f"<strong>2026-11-25</strong> {lateness}" in body


@time_machine.travel(NOW, tick=False)
def test_dataset_page_shows_the_usual_arrival_next_to_the_timeline(consumer, orders_daily):
    # Ten daily partitions up to 11-27 (Friday), each ready n minutes past 05:00 UTC the
    # day its period ends; the newest ends on Saturday 11-28.
    for n in range(10):
        day = datetime(2026, 11, 18, tzinfo=UTC) + timedelta(days=n)
        end = day + timedelta(days=1)
        partition(orders_daily, f"{day:%Y-%m-%d}", ready_at=end + timedelta(hours=5, minutes=n))
    # 11-10 filled in after all of them: a backfill, left out.
    partition(orders_daily, "2026-11-10", ready_at=NOW - timedelta(hours=1))
    response, body = page(consumer, orders_daily)
    groups = dict(response.context["groups"])
    assert groups["all days"].periods == 10 and response.context["profile"].backfills == 1
    section = body[body.index('id="arrival-profile"') :]
    assert "learned from 10 of the last 90 periods (1 backfill left out)" in section
    # All days: p50 is the 5th of 10 (05:04), p90 the 9th (05:08), p99 the 10th (05:09).
    assert "<td>all days</td>" in section
    assert '5 h 4 min <span class="muted small">≈ 05:04</span>' in section
    assert '5 h 9 min <span class="muted small">≈ 05:09</span>' in section
    # Seven business-day ends, three weekend ends (11-21, 11-22, 11-28): too few.
    assert (groups["business days (Mon-Fri)"].periods, groups["weekends"].periods) == (7, 3)
    assert "fewer than 5 periods" in section
    assert "Monday" not in section  # no weekday has five periods


@time_machine.travel(NOW, tick=False)
def test_dataset_page_suggests_an_earlier_deadline(consumer, orders_daily):
    # Twenty days ready by 01:19 UTC; the deadline is 06:30 Berlin (05:30 UTC) + 30 min.
    for n in range(20):
        day = datetime(2026, 11, 7, tzinfo=UTC) + timedelta(days=n)
        end = day + timedelta(days=1)
        partition(orders_daily, f"{day:%Y-%m-%d}", ready_at=end + timedelta(hours=1, minutes=n))
    _, body = page(consumer, orders_daily)
    suggestion = body[body.index('id="sla-suggestion"') :]
    assert "deadline could be earlier" in suggestion
    assert "Ready by 1 h 18 min after the period ends" in suggestion  # rank 19 of 20
    assert "the deadline is 5 h 30 min after it" in suggestion


def test_dataset_page_of_an_unpartitioned_dataset_has_no_arrival_profile(consumer, orders):
    dataset = DatasetFactory(owner=orders, name="dim/customers", partitioning="none")
    response, body = page(consumer, dataset)
    assert response.context["profile"] is None and 'id="arrival-profile"' not in body


@time_machine.travel(NOW, tick=False)
def test_dataset_page_judges_a_restated_partition_by_when_it_first_arrived(consumer, orders_daily):
    Dataset.objects.filter(pk=orders_daily.pk).update(created_at=NOW - timedelta(days=60))
    row = partition(orders_daily, "2026-11-24", ready_at=datetime(2026, 11, 25, 4, tzinfo=UTC))
    rerun = PartitionRevision.objects.create(
        partition=row, version="rerun-2", state="ready", ready_at=NOW - timedelta(hours=2)
    )
    Partition.objects.filter(pk=row.pk).update(current_revision=rerun)
    response, body = page(consumer, orders_daily)
    cell = {c.key: c for c in response.context["cells"]}["2026-11-24"]
    assert (cell.status, cell.restated, cell.ready_at) == ("on_time", True, rerun.ready_at)
    # The tooltip says when it arrived on time, then when it was restated.
    assert (
        "2026-11-24: ready on time; ready 2026-11-25 04:00 UTC; restated 2026-11-28 07:00 UTC"
        in body
    )


@time_machine.travel(NOW, tick=False)
def test_dataset_page_does_not_draw_a_first_versioned_publish_as_restated(consumer, orders_daily):
    Dataset.objects.filter(pk=orders_daily.pk).update(created_at=NOW - timedelta(days=60))
    row = partition(orders_daily, "2026-11-24", ready_at=datetime(2026, 11, 25, 4, tzinfo=UTC))
    PartitionRevision.objects.filter(partition=row).update(version="v1")
    response, body = page(consumer, orders_daily)
    cell = {c.key: c for c in response.context["cells"]}["2026-11-24"]
    assert (cell.status, cell.restated) == ("on_time", False)
    assert "2026-11-24: ready on time; ready 2026-11-25 04:00 UTC</title>" in body
    assert 'class="restated"' not in body


@time_machine.travel(NOW, tick=False)
def test_dataset_page_draws_periods_before_registration_as_not_tracked(consumer, orders_daily):
    # Registered today at 05:00 UTC: only the 27th's deadline (28th 05:30 UTC) and later
    # ones fall after it; the 27th is late by now.
    Dataset.objects.filter(pk=orders_daily.pk).update(created_at=NOW - timedelta(hours=4))
    response, body = page(consumer, orders_daily)
    cells = {c.key: c for c in response.context["cells"]}
    assert cells["2026-11-26"].status == "untracked"
    assert cells["2026-10-29"].status == "untracked"
    assert (cells["2026-11-27"].status, cells["2026-11-27"].late_seconds) == ("missing", 10800)
    assert sum(c.status == "untracked" for c in cells.values()) == 29
    assert "2026-11-26: not tracked (before the dataset was registered)" in body
    assert '<span class="swatch untracked"></span> not tracked' in body
    late_list = body.split('id="late-partitions"')[1].split("</p>")[0]
    assert "2026-11-27" in late_list and "2026-11-26" not in late_list


@time_machine.travel(NOW, tick=False)
def test_dataset_page_lists_declared_and_observed_consumers(consumer, orders_daily, analytics):
    finance = TeamFactory(slug="finance")
    SubscriptionFactory(team=analytics, dataset=orders_daily)
    observe(analytics, "rollup", orders_daily)
    observe(finance, "board_report", orders_daily)
    response, body = page(consumer, orders_daily)
    consumers = {c.team.slug: c for c in response.context["consumers"]}
    assert len(consumers["analytics"].subscriptions) == 1
    assert [u.job.name for u in consumers["analytics"].reads] == ["rollup"]
    assert consumers["finance"].subscriptions == []
    assert "undeclared reader" in body and "airflow://finance/board_report" in body


@time_machine.travel(NOW, tick=False)
def test_dataset_page_draws_upstream_and_downstream_lineage(consumer, orders_daily, orders):
    raw = DatasetFactory(owner=orders, namespace="s3://lake", name="raw/orders")
    observe(orders, "build_daily", raw, "read")
    observe(orders, "build_daily", orders_daily, "write")
    observe(orders, "export", orders_daily, "read")
    observe(orders, "export", ("s3://exports", "orders.csv"), "write")
    response, body = page(consumer, orders_daily)
    boxes = {b.label: b for b in response.context["lineage"].boxes}
    assert boxes["raw/orders"].x < boxes["build_daily"].x < boxes["curated/orders_daily"].x
    assert boxes["curated/orders_daily"].x < boxes["export"].x < boxes["orders.csv"].x
    assert f'href="/datasets/{raw.pk}/"' in body  # upstream datasets link to their page
    assert 'class="node dataset uncatalogued"' in body
    assert body.count('class="edge"') == 4


@time_machine.travel(NOW, tick=False)
def test_dataset_page_shows_change_notices_with_acknowledgements_and_audit(
    consumer, orders_daily, analytics
):
    SubscriptionFactory(team=analytics, dataset=orders_daily)
    finance = TeamFactory(slug="finance")
    SubscriptionFactory(team=finance, dataset=orders_daily)
    notice = announce(orders_daily)
    ChangeNoticeAcknowledgement.objects.create(
        notice=notice, team=finance, acknowledged_by="user:f", acknowledged_at=NOW
    )
    AuditEntry.objects.create(
        dataset=orders_daily,
        actor="user:olga",
        action="dataset.updated",
        changes={"criticality": ["medium", "high"]},
    )
    _, body = page(consumer, orders_daily)
    assert "breaking schema change" in body and "Column amount becomes a decimal." in body
    assert "finance ✓" in body and "analytics pending" in body
    assert "Acknowledge for analytics" in body
    assert "dataset.updated" in body and "medium → high" in body


def test_dataset_page_query_count_is_bounded(
    consumer, orders_daily, analytics, orders, django_assert_max_num_queries
):
    for n in range(5):
        team = TeamFactory(slug=f"reader-{n}")
        SubscriptionFactory(team=team, dataset=orders_daily)
        observe(team, f"job{n}", orders_daily)
        announce(orders_daily, days=30 + n)
    for day in range(1, 28):
        partition(orders_daily, f"2026-11-{day:02}", ready_at=datetime(2026, 11, 28, tzinfo=UTC))
    # 25: the forecast of the partition due at the next deadline reads its readiness, its
    # state and the dataset's upstreams (none here); who needs it by when is one more, and
    # the blast radius one (the lateness it causes downstream: none here; four when some).
    with django_assert_max_num_queries(25) as captured:
        page(consumer, orders_daily)
    print(f"\ndataset page: {len(captured)} queries")


def test_unknown_dataset_is_404(consumer):
    assert consumer.get("/datasets/999999/").status_code == 404
    assert consumer.get("/datasets/99999999999999999999/").status_code == 404


# --- editing ---------------------------------------------------------------------------------


def edit_data(dataset, **changes):
    data = {
        "description": dataset.description,
        "criticality": dataset.criticality,
        "completion_signal": dataset.completion_signal,
        "sla_cron": dataset.sla_cron,
        "sla_timezone": dataset.sla_timezone,
        "sla_grace_seconds": dataset.sla_grace_seconds,
        "sla_calendar": dataset.sla_calendar,
        "sla_holidays_country": dataset.sla_holidays_country,
        "sla_holidays_subdivision": dataset.sla_holidays_subdivision,
        "sla_non_business_day": dataset.sla_non_business_day,
        "change_notice_days": dataset.change_notice_days,
        **({"accepts_future_partitions": "on"} if dataset.accepts_future_partitions else {}),
        "lifecycle": dataset.lifecycle,
        "sunset_at": "",
        "override_reason": "",
    }
    return {**data, **changes}


def test_owner_edits_through_dataset_update_and_it_is_audited(owner, orders_daily):
    response = owner.post(
        f"/datasets/{orders_daily.pk}/edit",
        edit_data(orders_daily, criticality="critical", sla_cron="0 7 * * *"),
    )
    assert response.status_code == 302
    orders_daily.refresh_from_db()
    assert (orders_daily.criticality, orders_daily.sla_cron) == ("critical", "0 7 * * *")
    entry = AuditEntry.objects.get(dataset=orders_daily, action="dataset.updated")
    assert entry.actor == "user:olga"
    assert entry.changes == {
        "criticality": ["high", "critical"],
        "sla_cron": ["30 6 * * *", "0 7 * * *"],
    }
    assert "Saved." in owner.get(response["Location"]).content.decode()


def test_owner_puts_the_sla_on_business_days_and_the_page_says_so(owner, orders_daily):
    changes = {
        "sla_calendar": "business_days",
        "sla_holidays_country": "DE",
        "sla_holidays_subdivision": "BY",
        "sla_non_business_day": "skip",
    }
    response = owner.post(f"/datasets/{orders_daily.pk}/edit", edit_data(orders_daily, **changes))
    assert response.status_code == 302
    orders_daily.refresh_from_db()
    assert {f: getattr(orders_daily, f) for f in changes} == changes
    _, body = page(owner, orders_daily)
    assert "business days only (DE-BY: weekends and public holidays off)" in body
    # The form shows them again: another change keeps them.
    owner.post(f"/datasets/{orders_daily.pk}/edit", edit_data(orders_daily, criticality="low"))
    orders_daily.refresh_from_db()
    assert orders_daily.criticality == "low"
    assert {f: getattr(orders_daily, f) for f in changes} == changes


def test_owner_lets_a_forecast_accept_future_partitions(owner, orders_daily):
    response = owner.post(
        f"/datasets/{orders_daily.pk}/edit",
        edit_data(orders_daily, accepts_future_partitions="on"),
    )
    assert response.status_code == 302
    orders_daily.refresh_from_db()
    assert orders_daily.accepts_future_partitions is True
    entry = AuditEntry.objects.get(dataset=orders_daily, action="dataset.updated")
    assert entry.changes == {"accepts_future_partitions": [False, True]}
    _, body = page(owner, orders_daily)
    assert "accepts future partitions" in body

    owner.post(f"/datasets/{orders_daily.pk}/edit", edit_data(orders_daily))  # unchanged
    orders_daily.refresh_from_db()
    assert orders_daily.accepts_future_partitions is True
    data = edit_data(orders_daily)
    del data["accepts_future_partitions"]  # an unticked box is not sent
    owner.post(f"/datasets/{orders_daily.pk}/edit", data)
    orders_daily.refresh_from_db()
    assert orders_daily.accepts_future_partitions is False


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"sla_cron": "every day"}, "sla_cron", "expected 5 fields"),
        ({"sla_cron": "75 6 * * *"}, "sla_cron", "minute field '75' is out of range 0-59"),
        ({"sla_cron": "0 6 30 2 *"}, "sla_cron", "never fires"),
        ({"sla_timezone": "Mars/Olympus"}, "sla_timezone", "Mars/Olympus"),
        ({"lifecycle": "retired"}, "lifecycle", "retirement notice"),
        ({"lifecycle": "retired"}, None, "or fill in the lifecycle override reason"),
        ({"sla_grace_seconds": "-5"}, "sla_grace_seconds", "greater than or equal to 0"),
        ({"sla_grace_seconds": "9999999"}, "sla_grace_seconds", "less than or equal to 2678400"),
        (
            {"sla_grace_seconds": "99999999999999999999"},
            "sla_grace_seconds",
            "less than or equal to 2678400",
        ),
        ({"change_notice_days": "1099511627776"}, "change_notice_days", "or equal to 365"),
        ({"change_notice_days": "9999999"}, "change_notice_days", "or equal to 365"),
        (
            {"sla_calendar": "business_days", "sla_holidays_country": "XX"},
            "sla_holidays_country",
            "sla_holidays_country 'XX': unknown holidays country",
        ),
        ({"sla_calendar": "fortnightly"}, "sla_calendar", "choose one of: none, business_days"),
    ],
)
def test_owner_edit_breaking_a_rule_shows_the_service_problem_on_the_form(
    owner, orders_daily, changes, field, message
):
    response = owner.post(f"/datasets/{orders_daily.pk}/edit", edit_data(orders_daily, **changes))
    assert response.status_code == 400
    form = response.context["edit_form"]
    errors = form.errors.get(field or "__all__")
    assert errors and message in " ".join(errors), form.errors
    orders_daily.refresh_from_db()
    assert orders_daily.sla_cron == "30 6 * * *" and orders_daily.lifecycle == "active"
    assert not AuditEntry.objects.filter(dataset=orders_daily).exists()


def test_another_team_cannot_edit_and_sees_no_edit_form(consumer, orders_daily):
    response = consumer.post(
        f"/datasets/{orders_daily.pk}/edit", edit_data(orders_daily, criticality="low")
    )
    assert response.status_code == 403
    assert "only members of team orders edit" in response.content.decode()
    orders_daily.refresh_from_db()
    assert orders_daily.criticality == "high"
    _, body = page(consumer, orders_daily)
    assert "Edit (owner)" not in body


def test_edit_without_csrf_token_is_refused(make_person, orders, orders_daily):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_person("olga", orders))
    response = client.post(
        f"/datasets/{orders_daily.pk}/edit", edit_data(orders_daily, criticality="low")
    )
    assert response.status_code == 403
    orders_daily.refresh_from_db()
    assert orders_daily.criticality == "high"


# --- subscribing and acknowledging ----------------------------------------------------------


def test_consumer_subscribes_its_team_and_sees_the_new_endpoint_secret_once(
    consumer, orders_daily, analytics
):
    response = consumer.post(
        f"/datasets/{orders_daily.pk}/subscribe",
        {"team": "analytics", "endpoint_url": "https://hooks.example.com/analytics"},
    )
    assert response.status_code == 200
    subscription = Subscription.objects.get(team=analytics, dataset=orders_daily)
    assert subscription.endpoint.url == "https://hooks.example.com/analytics"
    body = response.content.decode()
    assert "whsec_" in body and "subscribed to" in body
    again = consumer.post(
        f"/datasets/{orders_daily.pk}/subscribe",
        {"team": "analytics", "endpoint_url": "https://hooks.example.com/analytics"},
    )
    assert again.status_code == 302  # the endpoint exists: no secret to show again
    assert Subscription.objects.filter(team=analytics).count() == 1


def test_subscribing_again_with_another_url_shows_the_existing_subscription(
    consumer, orders_daily, analytics
):
    form = {"team": "analytics", "endpoint_url": "https://hooks.example.com/analytics"}
    consumer.post(f"/datasets/{orders_daily.pk}/subscribe", form)
    subscription = Subscription.objects.get(team=analytics)
    response = consumer.post(
        f"/datasets/{orders_daily.pk}/subscribe",
        {**form, "endpoint_url": "https://hooks.example.com/elsewhere"},
    )
    assert response.status_code == 400
    errors = str(response.context["subscribe_form"].errors)
    assert f"subscription {subscription.pk} sends to {form['endpoint_url']}" in errors
    subscription.refresh_from_db()
    assert subscription.endpoint.url == "https://hooks.example.com/analytics"


def test_subscribe_without_endpoint_declares_the_read(consumer, orders_daily, analytics):
    response = consumer.post(
        f"/datasets/{orders_daily.pk}/subscribe",
        {"team": "analytics", "job_namespace": "airflow://analytics", "job_name": "rollup"},
    )
    assert response.status_code == 302
    subscription = Subscription.objects.get(team=analytics)
    assert (subscription.job_name, subscription.endpoint) == ("rollup", None)


def test_subscribe_with_a_need_by_is_judged_and_warned_as_the_api_does(
    consumer, orders_daily, analytics
):
    response = consumer.post(
        f"/datasets/{orders_daily.pk}/subscribe",
        {"team": "analytics", "need_by_cron": "0 3 * * *", "need_by_timezone": ""},
        follow=True,
    )
    assert response.status_code == 200
    subscription = Subscription.objects.get(team=analytics)
    assert (subscription.need_by_cron, subscription.need_by_timezone) == ("0 3 * * *", "UTC")
    said = [str(m) for m in response.context["messages"]]
    assert any("need" in m.lower() for m in said[1:]), said  # need_by_before_sla


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (
            {"team": "analytics", "endpoint_url": "http://user:pw@hooks.example.com/x"},
            "endpoint_url",
        ),
        ({"team": "analytics", "job_name": "rollup"}, "job_name"),
        ({"team": "analytics", "need_by_cron": "0 0 30 2 *"}, "need_by_cron"),
        (
            {"team": "analytics", "need_by_cron": "0 7 * * *", "need_by_timezone": "Mars/Base"},
            "need_by_timezone",
        ),
        ({"team": "orders"}, "team"),  # not one of ana's teams
    ],
)
def test_subscribe_refuses_what_the_api_refuses(consumer, orders_daily, data, field):
    response = consumer.post(f"/datasets/{orders_daily.pk}/subscribe", data)
    assert response.status_code == 400
    assert field in response.context["subscribe_form"].errors
    assert not Subscription.objects.exists()


@pytest.mark.parametrize(
    "url", ["https://169.254.169.254/latest/meta-data", "http://127.0.0.1:8001/hook"]
)
def test_subscribe_refuses_a_webhook_at_a_blocked_ip_address(consumer, orders_daily, url, settings):
    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = []
    response = consumer.post(
        f"/datasets/{orders_daily.pk}/subscribe", {"team": "analytics", "endpoint_url": url}
    )
    assert response.status_code == 400
    errors = response.context["subscribe_form"].errors["endpoint_url"]
    assert "not a public address" in " ".join(errors)
    assert not Subscription.objects.exists() and not Endpoint.objects.exists()


def test_subscribing_to_a_retired_dataset_shows_the_problem(consumer, orders_daily):
    Dataset.objects.filter(pk=orders_daily.pk).update(lifecycle="retired")
    response = consumer.post(f"/datasets/{orders_daily.pk}/subscribe", {"team": "analytics"})
    assert response.status_code == 400
    assert "retired" in str(response.context["subscribe_form"].errors)


def test_consumer_acknowledges_a_change_notice(consumer, orders_daily, analytics):
    SubscriptionFactory(team=analytics, dataset=orders_daily)
    notice = announce(orders_daily)
    url = f"/datasets/{orders_daily.pk}/notices/{notice.pk}/acknowledge"
    response = consumer.post(url, {"team": "analytics"})
    assert response.status_code == 302
    ack = ChangeNoticeAcknowledgement.objects.get(notice=notice)
    assert (ack.team, ack.acknowledged_by) == (analytics, "user:ana")
    _, body = page(consumer, orders_daily)
    assert "analytics ✓" in body and "Acknowledge for analytics" not in body


def test_a_team_that_is_not_a_consumer_cannot_acknowledge(consumer, orders_daily):
    notice = announce(orders_daily)
    url = f"/datasets/{orders_daily.pk}/notices/{notice.pk}/acknowledge"
    assert consumer.post(url, {"team": "analytics"}).status_code == 403
    assert consumer.post(url, {"team": "orders"}).status_code == 403  # not ana's team
    assert not ChangeNoticeAcknowledgement.objects.exists()


def test_acknowledging_another_datasets_notice_is_404(consumer, orders_daily, orders):
    other = DatasetFactory(owner=orders)
    notice = announce(other)
    url = f"/datasets/{orders_daily.pk}/notices/{notice.pk}/acknowledge"
    assert consumer.post(url, {"team": "analytics"}).status_code == 404


def test_acknowledge_without_csrf_token_is_refused(make_person, analytics, orders_daily):
    SubscriptionFactory(team=analytics, dataset=orders_daily)
    notice = announce(orders_daily)
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_person("ana", analytics))
    url = f"/datasets/{orders_daily.pk}/notices/{notice.pk}/acknowledge"
    assert client.post(url, {"team": "analytics"}).status_code == 403
    assert not ChangeNoticeAcknowledgement.objects.exists()


def test_dataset_pages_need_a_login(client, orders_daily):
    assert client.get(f"/datasets/{orders_daily.pk}/").status_code == 302
    response = client.post(f"/datasets/{orders_daily.pk}/subscribe", {"team": "orders"})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_unpartitioned_dataset_page_has_no_timeline(consumer, orders):
    dataset = DatasetFactory(owner=orders, partitioning="none", sla_cron="")
    response, body = page(consumer, dataset)
    assert response.context["cells"] == [] and "Unpartitioned: no timeline." in body
    assert "no SLA" in body


def test_owner_edit_with_a_suspicious_cron_saves_and_shows_the_warning(owner, orders_daily):
    response = owner.post(
        f"/datasets/{orders_daily.pk}/edit",
        edit_data(orders_daily, sla_cron="* 6 * * *"),
        follow=True,
    )
    assert response.status_code == 200
    orders_daily.refresh_from_db()
    assert orders_daily.sla_cron == "* 6 * * *"  # still saved
    body = response.content.decode()
    assert "SLA deadline (cron): minute is &#x27;*&#x27; with hour &#x27;6&#x27;" in body
    assert 'id="sla-warnings"' in body
    assert "every_minute_of_fixed_hour" in body


@time_machine.travel(datetime(2026, 3, 27, 12, tzinfo=UTC), tick=False)
def test_dataset_page_shows_next_deadlines_in_its_zone_and_utc_across_dst(consumer, orders_daily):
    Dataset.objects.filter(pk=orders_daily.pk).update(sla_cron="30 2 * * *")
    response, body = page(consumer, orders_daily)
    assert [(d["local"], d["offset"]) for d in response.context["deadlines"]] == [
        ("Sat 2026-03-28 02:30", "+01:00"),
        ("Sun 2026-03-29 03:00", "+02:00"),  # 02:30 does not occur: the end of the gap
        ("Mon 2026-03-30 02:30", "+02:00"),
    ]
    assert "Sun 2026-03-29 03:00 Europe/Berlin" in body
    assert "(UTC+02:00) · 2026-03-29 01:00 UTC" in body
    assert 'id="sla-warnings"' not in body
