import pytest

from catalog.models import (
    Delivery,
    Notification,
    Partition,
    PartitionRevision,
    ReadinessEvent,
)
from catalog.services.teams import api_key_create
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/readiness"


@pytest.fixture
def dataset(team):
    return DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders")


@pytest.fixture
def publisher(client_for, team):
    return client_for(team, scopes=["publish"])


def publish(client, partition="2026-11-28", headers=None, **extra):
    body = {"namespace": "s3://lake", "name": "raw/orders", "partition": partition, **extra}
    return client.post(URL, body, format="json", headers=headers or {})


def test_publish_creates_partition_revision_event_and_deliveries(publisher, dataset):
    subs = SubscriptionFactory.create_batch(2, dataset=dataset)
    SubscriptionFactory(dataset=dataset, endpoint=None)  # declared, nowhere to notify
    response = publish(
        publisher, manifest={"expected_files": 4, "row_count": 10}, metadata={"rows": 10}
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "ready"
    assert (body["logical_start"], body["logical_end"]) == (
        "2026-11-28T00:00:00Z",
        "2026-11-29T00:00:00Z",
    )
    partition = Partition.objects.get(dataset=dataset, key="2026-11-28")
    assert partition.current_revision.state == "ready"
    assert partition.current_revision.manifest == {"expected_files": 4, "row_count": 10}
    event = ReadinessEvent.objects.get()
    assert body["event_id"] == event.id
    notification = Notification.objects.get()
    assert notification.type == "partition.ready"
    assert notification.payload["data"]["partition"] == "2026-11-28"
    assert notification.payload["id"] == str(notification.id)
    assert sorted(Delivery.objects.values_list("endpoint_id", flat=True)) == sorted(
        s.endpoint_id for s in subs
    )


def test_publish_rings_the_delivery_doorbell_after_commit(
    publisher, dataset, django_capture_on_commit_callbacks
):
    SubscriptionFactory(dataset=dataset)
    with django_capture_on_commit_callbacks() as callbacks:
        publish(publisher)
    assert len(callbacks) == 1


def test_publish_without_subscribers_rings_no_doorbell(
    publisher, dataset, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        publish(publisher)
    assert callbacks == []


def test_same_publish_three_times_is_one_event_one_partition_one_delivery(publisher, dataset):
    SubscriptionFactory(dataset=dataset)
    responses = [publish(publisher) for _ in range(3)]
    assert [r.status_code for r in responses] == [201, 200, 200]
    assert responses[0].json() == responses[1].json() == responses[2].json()
    assert (
        Partition.objects.count(),
        ReadinessEvent.objects.count(),
        Delivery.objects.count(),
    ) == (1, 1, 1)


def test_idempotency_key_replays_the_first_response(publisher, dataset):
    SubscriptionFactory(dataset=dataset)
    headers = {"Idempotency-Key": "run-42"}
    responses = [publish(publisher, headers=headers) for _ in range(3)]
    assert [r.status_code for r in responses] == [201, 201, 201]
    assert responses[0].json() == responses[1].json() == responses[2].json()
    assert "Idempotent-Replayed" not in responses[0]
    assert responses[1]["Idempotent-Replayed"] == "true"
    assert (ReadinessEvent.objects.count(), Delivery.objects.count()) == (1, 1)


def test_idempotency_key_accepts_structured_field_string(publisher, dataset):
    publish(publisher, headers={"Idempotency-Key": '"abc"'})
    assert publish(publisher, headers={"Idempotency-Key": "abc"})["Idempotent-Replayed"] == "true"


def test_idempotency_key_with_different_body_is_422(publisher, dataset):
    publish(publisher, headers={"Idempotency-Key": "k1"})
    response = publish(publisher, partition="2026-11-29", headers={"Idempotency-Key": "k1"})
    assert response.status_code == 422
    assert response.json()["code"] == "idempotency_key_reused"
    assert not Partition.objects.filter(key="2026-11-29").exists()


@pytest.mark.parametrize("value", ["", "a b", "x" * 256, "é"])
def test_malformed_idempotency_key_is_400(publisher, dataset, value):
    response = publish(publisher, headers={"Idempotency-Key": value})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_idempotency_key"
    assert not Partition.objects.exists()


def test_idempotency_keys_are_scoped_per_team(client_for, team, dataset):
    other = TeamFactory(slug="other")
    DatasetFactory(owner=other, namespace="s3://lake", name="raw/other")
    publish(client_for(team), headers={"Idempotency-Key": "same"})
    response = client_for(other).post(
        URL,
        {"namespace": "s3://lake", "name": "raw/other", "partition": "2026-11-28"},
        format="json",
        headers={"Idempotency-Key": "same"},
    )
    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response


def test_expired_idempotency_key_is_a_new_request(publisher, dataset, settings):
    settings.IDEMPOTENCY_KEY_TTL_SECONDS = 0
    publish(publisher, headers={"Idempotency-Key": "k"})
    response = publish(publisher, partition="2026-11-29", headers={"Idempotency-Key": "k"})
    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response


def test_new_version_of_ready_partition_is_a_restatement(publisher, dataset):
    SubscriptionFactory(dataset=dataset)
    publish(publisher, version="v1")
    response = publish(publisher, version="v2")
    assert response.status_code == 201
    assert response.json()["current_version"] == "v2"
    partition = Partition.objects.get()
    assert partition.current_revision.version == "v2"
    assert partition.revisions.count() == 2
    restated = Notification.objects.get(type="partition.restated")
    assert restated.payload["data"]["previous_version"] == "v1"
    assert Delivery.objects.count() == 2


def test_late_retry_of_superseded_version_changes_nothing(publisher, dataset):
    publish(publisher, version="v1")
    publish(publisher, version="v2")
    response = publish(publisher, version="v1")
    assert response.status_code == 200
    assert (response.json()["version"], response.json()["current_version"]) == ("v1", "v2")
    assert Partition.objects.get().current_revision.version == "v2"
    assert ReadinessEvent.objects.count() == 2


def test_unversioned_publish_refers_to_current_revision(publisher, dataset):
    publish(publisher, version="v1")
    response = publish(publisher)
    assert response.status_code == 200
    assert response.json()["version"] == "v1"
    assert PartitionRevision.objects.count() == 1


def test_failed_then_ready_is_two_events(publisher, dataset):
    SubscriptionFactory(dataset=dataset)
    assert publish(publisher, state="failed").status_code == 201
    assert Partition.objects.get().current_revision.state == "failed"
    assert publish(publisher).status_code == 201
    assert list(Notification.objects.order_by("created_at").values_list("type", flat=True)) == [
        "partition.failed",
        "partition.ready",
    ]


def test_failed_new_version_does_not_hide_the_ready_one(publisher, dataset):
    publish(publisher, version="v1")
    publish(publisher, version="v2", state="failed")
    assert Partition.objects.get().current_revision.version == "v1"
    assert Notification.objects.filter(type="partition.failed").count() == 1
    publish(publisher, version="v2")  # the rerun succeeded: now a restatement
    assert Partition.objects.get().current_revision.version == "v2"
    assert Notification.objects.filter(type="partition.restated").count() == 1


def test_ready_revision_cannot_become_failed(publisher, dataset):
    publish(publisher)
    response = publish(publisher, state="failed")
    assert response.status_code == 409
    assert response.json()["code"] == "revision_already_ready"
    assert Partition.objects.get().current_revision.state == "ready"


def test_partition_key_of_wrong_format_is_400_naming_expected_format(publisher, dataset):
    response = publish(publisher, partition="28.11.2026")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_partition_key"
    assert body["expected_format"].startswith("YYYY-MM-DD")
    assert body["errors"][0]["field"] == "partition"
    assert not Partition.objects.exists()


def test_unpartitioned_dataset_takes_no_key_and_new_versions_are_ready(client_for, team):
    DatasetFactory(
        owner=team, namespace="postgres://wh:5432", name="dim.customers", partitioning="none"
    )
    client = client_for(team)
    body = {"namespace": "postgres://wh:5432", "name": "DIM.customers"}
    assert client.post(URL, {**body, "version": "a"}, format="json").status_code == 201
    assert client.post(URL, {**body, "version": "b"}, format="json").status_code == 201
    assert client.post(URL, {**body, "partition": "2026-11-28"}, format="json").status_code == 400
    assert set(Notification.objects.values_list("type", flat=True)) == {"partition.ready"}


def test_hourly_partition_in_dataset_time_zone(client_for, team):
    DatasetFactory(
        owner=team,
        namespace="s3://lake",
        name="raw/clicks",
        partitioning="hourly",
        partition_timezone="Asia/Kolkata",
    )
    response = client_for(team).post(
        URL,
        {"namespace": "s3://lake", "name": "raw/clicks", "partition": "2026-11-28T05"},
        format="json",
    )
    assert response.json()["logical_start"] == "2026-11-27T23:30:00Z"


def test_other_team_cannot_publish(client_for, dataset):
    response = publish(client_for(TeamFactory(slug="intruders")))
    assert response.status_code == 403
    assert response.json()["code"] == "publish_not_allowed"
    assert not Partition.objects.exists()


def test_delegated_key_may_publish_for_named_dataset_only(api_client, dataset):
    orchestrator = TeamFactory(slug="orchestrator")
    other = DatasetFactory(owner=dataset.owner, namespace="s3://lake", name="raw/other")
    _, token = api_key_create(
        team=orchestrator, name="airflow", scopes=["publish"], delegated_datasets=[dataset]
    )
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert publish(api_client).status_code == 201
    response = api_client.post(
        URL,
        {"namespace": other.namespace, "name": other.name, "partition": "2026-11-28"},
        format="json",
    )
    assert response.status_code == 403
    assert ReadinessEvent.objects.get().published_by == orchestrator


def test_unknown_dataset_is_404(publisher, dataset):
    response = publisher.post(
        URL, {"namespace": "s3://lake", "name": "nope", "partition": "2026-11-28"}, format="json"
    )
    assert response.status_code == 404
    assert response.json()["code"] == "dataset_not_found"


def test_retired_dataset_refuses_readiness(publisher, dataset):
    dataset.lifecycle = "retired"
    dataset.save()
    response = publish(publisher)
    assert response.status_code == 409
    assert response.json()["code"] == "dataset_retired"
    assert response.json()["errors"][0]["rule"] == "lifecycle_retired"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"state": "done"}, "state"),
        ({"manifest": {"row_count": 3}}, "manifest.expected_files"),
        ({"manifest": {"expected_files": -1}}, "manifest.expected_files"),
        ({"manifest": {"expected_files": 1, "extra": 1}}, "manifest.extra"),
        ({"metadata": [1, 2]}, "metadata"),
        ({"version": ""}, "version"),
        ({"version": "v" * 129}, "version"),
        ({"partiton": "2026-11-28"}, "partiton"),
    ],
)
def test_publish_rejects_bad_fields(publisher, dataset, extra, field):
    response = publish(publisher, **extra)
    assert response.status_code == 400, response.json()
    assert field in [e["field"] for e in response.json()["errors"]]
    assert not Partition.objects.exists()


def test_partition_list_filters_and_latest_ready(client_for, publisher, dataset):
    for key in ("2026-11-25", "2026-11-26", "2026-11-27"):
        publish(publisher, partition=key)
    publish(publisher, partition="2026-11-28", state="failed")
    reader = client_for(dataset.owner, scopes=["read"])
    base = f"/api/v1/datasets/{dataset.id}/partitions"
    keys = [p["key"] for p in reader.get(base).json()["results"]]
    assert keys == ["2026-11-28", "2026-11-27", "2026-11-26", "2026-11-25"]
    assert [p["key"] for p in reader.get(base, {"state": "ready"}).json()["results"]] == keys[1:]
    ranged = reader.get(
        base, {"logical_from": "2026-11-26T00:00:00Z", "logical_to": "2026-11-28T00:00:00Z"}
    )
    assert [p["key"] for p in ranged.json()["results"]] == ["2026-11-27", "2026-11-26"]
    latest = reader.get(f"{base}/latest").json()
    assert (latest["key"], latest["state"]) == ("2026-11-27", "ready")


def test_partition_list_query_count_is_bounded(
    client_for, publisher, dataset, django_assert_num_queries
):
    for day in range(1, 11):
        publish(publisher, partition=f"2026-11-{day:02d}")
    reader = client_for(dataset.owner, scopes=["read"])
    reader.get("/api/v1/me")  # the key row is cached from here
    with django_assert_num_queries(2):  # dataset, one page with revisions joined
        reader.get(f"/api/v1/datasets/{dataset.id}/partitions")


def test_latest_ready_is_404_when_none(client_for, dataset):
    response = client_for(dataset.owner).get(f"/api/v1/datasets/{dataset.id}/partitions/latest")
    assert response.status_code == 404
    assert response.json()["code"] == "partition_not_found"


def test_partition_list_rejects_inverted_range(client_for, dataset):
    response = client_for(dataset.owner).get(
        f"/api/v1/datasets/{dataset.id}/partitions",
        {"logical_from": "2026-11-28T00:00:00Z", "logical_to": "2026-11-01T00:00:00Z"},
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "logical_to"
