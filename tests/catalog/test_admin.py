import pytest
from django.contrib.auth.models import User

from catalog.models import SubscriptionEndpoint
from tests.catalog.factories import DatasetFactory, EndpointFactory, SubscriptionFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "team",
        "apikey",
        "dataset",
        "partition",
        "readinessevent",
        "subscription",
        "endpoint",
        "delivery",
        "auditentry",
        "changenotice",
        "changenoticeacknowledgement",
    ],
)
def test_admin_changelists_render(client, path):
    DatasetFactory()
    EndpointFactory()
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    response = client.get(f"/admin/catalog/{path}/", SERVER_NAME="localhost")
    assert response.status_code == 200
    assert b"secret_encrypted" not in response.content and b"digest" not in response.content


def test_change_notice_admin_shows_the_override_and_acknowledgements_read_only(client):
    from datetime import timedelta

    from django.utils import timezone

    from catalog.actors import Actor
    from catalog.change_notices import change_notice_acknowledge, change_notice_announce
    from tests.catalog.factories import SubscriptionFactory

    dataset = DatasetFactory()
    consumer = SubscriptionFactory(dataset=dataset).team
    notice = change_notice_announce(
        actor=Actor(team=dataset.owner, username="ana"),
        dataset=dataset,
        kind="retirement",
        description="going away",
        effective_at=timezone.now() + timedelta(days=1),
        now=timezone.now(),
        emergency=True,
        override_reason="storage contract ends",
    )
    change_notice_acknowledge(
        actor=Actor(team=consumer, username="bo"), notice=notice, now=notice.announced_at
    )
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    page = client.get(f"/admin/catalog/changenotice/{notice.pk}/change/", SERVER_NAME="localhost")
    assert page.status_code == 200
    assert b"storage contract ends" in page.content and b"user:bo" in page.content
    assert b'name="_save"' not in page.content  # nothing to save: read-only
    listing = client.get("/admin/catalog/changenotice/", SERVER_NAME="localhost")
    assert b"/admin/catalog/changenotice/add/" not in listing.content


@pytest.mark.parametrize(
    "path",
    ["datasettransfer", "datasetalias", "schemaobservation", "schemachange", "unclaimedusage"],
)
def test_read_only_admin_changelists_render(client, path):
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    response = client.get(f"/admin/catalog/{path}/", SERVER_NAME="localhost")
    assert response.status_code == 200
    assert client.get(f"/admin/catalog/{path}/add/", SERVER_NAME="localhost").status_code == 403


def test_dataset_admin_cannot_change_lifecycle_sunset_or_owner(client):
    from django.contrib import admin
    from django.forms.models import model_to_dict

    from catalog.models import Dataset
    from tests.catalog.factories import TeamFactory

    dataset = DatasetFactory(description="before")
    owner = dataset.owner
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    url = f"/admin/catalog/dataset/{dataset.pk}/change/"
    page = client.get(url, SERVER_NAME="localhost")
    assert page.status_code == 200
    for field in ("lifecycle", "sunset_at", "owner"):
        assert f'name="{field}"'.encode() not in page.content

    form_fields = admin.site._registry[Dataset].get_form(None, dataset).base_fields
    data = {k: v for k, v in model_to_dict(dataset).items() if k in form_fields and v is not None}
    data |= {
        "description": "after",
        "lifecycle": "retired",
        "sunset_at_0": "2026-12-01",
        "sunset_at_1": "00:00:00",
        "owner": TeamFactory(slug="thief").pk,
    }
    response = client.post(url, data, SERVER_NAME="localhost")
    assert response.status_code == 302, response.content[:2000]
    dataset.refresh_from_db()
    assert dataset.description == "after"  # the rest of the form still saves
    assert (dataset.lifecycle, dataset.sunset_at, dataset.owner) == ("active", None, owner)


def test_a_team_slack_webhook_follows_the_rules_of_webhooks(admin_client, settings):
    from catalog.models import Team

    settings.TIDEMARK_OUTBOUND_ALLOW_NETWORKS = []  # production's policy
    form = {"slug": "orders", "name": "Orders", "membership_set-TOTAL_FORMS": "0"}
    form["membership_set-INITIAL_FORMS"] = "0"
    for url, error in [
        ("https://169.254.169.254/hook", "not a public address"),
        ("https://10.0.0.5/hook", "not a public address"),
        ("https://user:pw@hooks.slack.com/services/x", "must not carry credentials"),
    ]:
        response = admin_client.post(
            "/admin/catalog/team/add/", {**form, "contact_slack_webhook": url}
        )
        assert response.status_code == 200 and error in response.content.decode(), url
    assert not Team.objects.exists()
    accepted = admin_client.post(
        "/admin/catalog/team/add/",
        {**form, "contact_slack_webhook": "https://hooks.slack.com/services/T0/B0/x"},
    )
    assert accepted.status_code == 302
    assert Team.objects.get().contact_slack_webhook == "https://hooks.slack.com/services/T0/B0/x"


def test_a_team_paging_routing_key_is_a_pagerduty_routing_key(admin_client):
    from catalog.models import Team

    form = {"slug": "orders", "name": "Orders", "membership_set-TOTAL_FORMS": "0"}
    form["membership_set-INITIAL_FORMS"] = "0"
    refused = admin_client.post("/admin/catalog/team/add/", {**form, "paging_routing_key": "abc"})
    assert refused.status_code == 200 and "32 letters or digits" in refused.content.decode()
    assert not Team.objects.exists()
    key = "r3FPuDv0a1b2c3d4yQYCc7trBkymIFcy"
    accepted = admin_client.post("/admin/catalog/team/add/", {**form, "paging_routing_key": key})
    assert accepted.status_code == 302
    assert Team.objects.get().paging_routing_key == key


def test_subscription_admin_shows_its_other_endpoints(client):
    subscription = SubscriptionFactory()
    standby = EndpointFactory(team=subscription.team, url="https://standby.example.com/h")
    SubscriptionEndpoint.objects.create(subscription=subscription, endpoint=standby)
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    response = client.get(
        f"/admin/catalog/subscription/{subscription.pk}/change/", SERVER_NAME="localhost"
    )
    assert response.status_code == 200
    assert b"standby.example.com" in response.content


def _admin_form_data(dataset, **changes):
    from django.contrib import admin
    from django.forms.models import model_to_dict
    from django.test import RequestFactory

    from catalog.models import Dataset

    request = RequestFactory().get("/")
    request.user = User(is_superuser=True, is_staff=True)
    # The add form (no row yet) has the identity fields; the change form has not.
    form = admin.site._registry[Dataset].get_form(request, dataset if dataset.pk else None)
    data = {k: v for k, v in model_to_dict(dataset).items() if k in form.base_fields}
    return {k: v for k, v in data.items() if v is not None} | changes


def test_an_sla_changed_in_the_admin_is_judged_on_the_new_deadline_and_audited(client):
    from datetime import UTC, datetime

    import time_machine

    from catalog.models import AuditEntry

    with time_machine.travel(datetime(2026, 12, 1, 12, 0, tzinfo=UTC), tick=False):
        dataset = DatasetFactory(sla_cron="0 6 * * *", sla_timezone="UTC")
        client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
        url = f"/admin/catalog/dataset/{dataset.pk}/change/"
        page = client.get(url, SERVER_NAME="localhost")
        for field in ("next_check_at", "next_deadline_at", "next_forecast_at", "poll_group"):
            assert f'name="{field}"'.encode() not in page.content

        data = _admin_form_data(dataset, sla_cron="30 18 * * *", sla_grace_seconds=600)
        response = client.post(url, data, SERVER_NAME="localhost")

    assert response.status_code == 302, response.content[:2000]
    dataset.refresh_from_db()
    assert dataset.next_deadline_at == datetime(2026, 12, 1, 18, 30, tzinfo=UTC)
    assert dataset.next_check_at == datetime(2026, 12, 1, 18, 40, tzinfo=UTC)
    entry = AuditEntry.objects.get(dataset=dataset, action="dataset.updated")
    assert entry.actor == "user:op"
    assert entry.changes["sla_cron"] == ["0 6 * * *", "30 18 * * *"]


def test_a_dataset_added_in_the_admin_is_registered_as_through_the_api(client):
    from datetime import UTC, datetime

    import time_machine

    from catalog.models import AuditEntry, Dataset
    from tests.catalog.factories import TeamFactory

    owner = TeamFactory(slug="orders")
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    blank = Dataset(namespace="S3://Lake/", name="raw/orders", owner=owner, sla_cron="0 6 * * *")
    data = _admin_form_data(blank, owner=owner.pk)
    with time_machine.travel(datetime(2026, 12, 1, 12, 0, tzinfo=UTC), tick=False):
        response = client.post("/admin/catalog/dataset/add/", data, SERVER_NAME="localhost")

    assert response.status_code == 302, response.content[:2000]
    dataset = Dataset.objects.get(name="raw/orders")
    assert dataset.namespace == "s3://lake"  # normalised as the API does
    assert dataset.next_check_at == datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    assert AuditEntry.objects.filter(dataset=dataset, action="dataset.registered").exists()


def test_what_the_services_refuse_in_the_admin_is_an_error_and_nothing_is_saved(client):
    dataset = DatasetFactory(sla_cron="0 6 * * *", description="before")
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    url = f"/admin/catalog/dataset/{dataset.pk}/change/"
    # February 30th never comes: the services refuse a cron that never fires.
    data = _admin_form_data(dataset, sla_cron="0 6 30 2 *", description="after")
    response = client.post(url, data, SERVER_NAME="localhost", follow=True)

    assert response.status_code == 200
    assert b"Not saved" in response.content and b"sla_cron" in response.content
    dataset.refresh_from_db()
    assert (dataset.sla_cron, dataset.description) == ("0 6 * * *", "before")


def _subscription_with_a_delivery():
    """A subscription whose dataset's owner published one partition: a partition, its
    readiness event and a delivery to the subscription's endpoint."""
    from django.utils import timezone

    from catalog.actors import Actor
    from catalog.services import publishing

    subscription = SubscriptionFactory()
    dataset = subscription.dataset
    publishing.readiness_publish(
        actor=Actor(team=dataset.owner),
        namespace=dataset.namespace,
        name=dataset.name,
        partition="2026-12-01",
        now=timezone.now(),
    )
    return subscription


@pytest.mark.parametrize(
    "path",
    ["partition", "readinessevent", "subscription", "endpoint", "delivery", "auditentry", "claim"],
)
def test_rows_the_services_keep_are_shown_but_never_added_changed_or_deleted(client, path):

    from catalog.models import AuditEntry, Claim, Delivery, Partition, ReadinessEvent
    from tests.catalog.factories import TeamFactory

    subscription = _subscription_with_a_delivery()
    dataset = subscription.dataset
    rows = {
        "partition": Partition.objects.get(dataset=dataset),
        "readinessevent": ReadinessEvent.objects.get(dataset=dataset),
        "subscription": subscription,
        "endpoint": subscription.endpoint,
        "delivery": Delivery.objects.get(endpoint=subscription.endpoint),
        "auditentry": AuditEntry.objects.create(
            dataset=dataset, team=dataset.owner, actor="user:x", action="dataset.updated"
        ),
        "claim": Claim.objects.create(kind="dataset_prefix", pattern="s3://x/", team=TeamFactory()),
    }
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    assert client.get(f"/admin/catalog/{path}/add/", SERVER_NAME="localhost").status_code == 403
    row = rows[path]
    page = client.get(f"/admin/catalog/{path}/{row.pk}/change/", SERVER_NAME="localhost")
    assert page.status_code == 200  # shown
    assert b'type="submit"' not in page.content.split(b'id="content-main"')[1]
    assert b"secret_encrypted" not in page.content and b"previous_secrets" not in page.content
    deleted = client.post(
        f"/admin/catalog/{path}/{row.pk}/delete/", {"post": "yes"}, SERVER_NAME="localhost"
    )
    assert deleted.status_code == 403
    assert type(row).objects.filter(pk=row.pk).exists()


def test_dead_letters_are_replayed_from_the_read_only_delivery_list(client):

    from catalog.models import Delivery

    subscription = _subscription_with_a_delivery()
    dead = Delivery.objects.get(endpoint=subscription.endpoint)
    Delivery.objects.filter(pk=dead.pk).update(state=Delivery.State.DEAD, attempts=8)
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))

    response = client.post(
        "/admin/catalog/delivery/",
        {"action": "replay", "_selected_action": [dead.pk]},
        SERVER_NAME="localhost",
        follow=True,
    )

    assert b"1 delivery(ies) replayed" in response.content
    dead.refresh_from_db()
    assert dead.state == Delivery.State.PENDING
