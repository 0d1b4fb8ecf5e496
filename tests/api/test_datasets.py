import pytest

from catalog.models import AuditEntry, Dataset
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

ORDERS = {"namespace": "s3://Lake/", "name": "raw/Orders", "partitioning": "daily"}


def test_register_dataset_normalises_identity_and_owns_it(client_for, team):
    response = client_for(team).post("/api/v1/datasets", ORDERS, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["namespace"], body["name"], body["owner"]) == ("s3://lake", "raw/Orders", "orders")
    assert body["change_notice_days"] == 14
    assert AuditEntry.objects.filter(dataset_id=body["id"], action="dataset.registered").exists()


def test_register_same_identity_twice_is_409(client_for, team):
    client = client_for(team)
    client.post("/api/v1/datasets", ORDERS, format="json")
    response = client.post("/api/v1/datasets", {**ORDERS, "namespace": "s3://lake"}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "dataset_exists"
    assert Dataset.objects.count() == 1


def test_a_registration_under_another_spelling_is_stored_under_the_normal_one(client_for, team):
    """The OpenLineage naming spec makes ``s3a://lake`` + ``/raw/orders/`` the dataset
    ``s3://lake`` + ``raw/orders``: registered so, and a second spelling is the same one."""
    client = client_for(team)
    spelt = {"namespace": "s3a://lake", "name": "/raw/orders/", "partitioning": "daily"}
    response = client.post("/api/v1/datasets", spelt, format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["namespace"], response.json()["name"]) == ("s3://lake", "raw/orders")
    again = {**spelt, "namespace": "s3n://LAKE", "name": "raw/orders"}
    assert client.post("/api/v1/datasets", again, format="json").status_code == 409


@pytest.mark.parametrize(
    ("payload", "field", "rule"),
    [
        ({"namespace": "s3://lake"}, "name", "required"),
        ({"namespace": "s3://lake", "name": "has space"}, "name", "whitespace"),
        ({"namespace": "not a namespace", "name": "x"}, "namespace", "whitespace"),
        ({"namespace": "://x", "name": "x"}, "namespace", "format"),
        (
            {"namespace": "s3://lake", "name": "x", "partitioning": "weekly"},
            "partitioning",
            "invalid_choice",
        ),
        (
            {"namespace": "s3://lake", "name": "x", "sla_timezone": "Mars/Base"},
            "sla_timezone",
            "iana_time_zone",
        ),
        (
            {"namespace": "s3://lake", "name": "x", "sla_cron": "61 * * * *"},
            "sla_cron",
            "cron_expression",
        ),
        (
            {"namespace": "s3://lake", "name": "x", "sla_cron": "0 0 * * * *"},
            "sla_cron",
            "cron_expression",
        ),
        (
            {"namespace": "s3://lake", "name": "x", "sla_grace_seconds": -1},
            "sla_grace_seconds",
            "min_value",
        ),
        (
            {"namespace": "s3://lake", "name": "x", "storage_source": "nope"},
            "storage_source",
            "invalid_choice",
        ),
        (
            {"namespace": "s3://lake", "name": "x", "completion_signal": "success_marker"},
            "location_template",
            "required",
        ),
        (
            {
                "namespace": "s3://lake",
                "name": "x",
                "completion_signal": "manifest",
                "storage_source": "lake",
                "location_template": "../../etc/{partition}",
            },
            "location_template",
            "location_template",
        ),
        ({"namespace": "s3://lake", "name": "x", "owner": "someone"}, "owner", "unknown"),
        ({"namespace": "s3://lake", "name": "x" * 1025}, "name", "max_length"),
    ],
)
def test_register_dataset_rejects_bad_fields_with_a_problem(
    client_for, team, payload, field, rule, settings
):
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": {"url": "file:///nonexistent/lake"}}
    response = client_for(team).post("/api/v1/datasets", payload, format="json")
    assert response.status_code == 400, response.json()
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert {"type", "title", "status", "detail"} <= set(body)
    assert {"field": field, "rule": rule} in [
        {"field": e["field"], "rule": e["rule"]} for e in body["errors"]
    ]
    assert Dataset.objects.count() == 0


def test_malformed_json_is_400_problem(client_for, team):
    response = client_for(team).post(
        "/api/v1/datasets", data="{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_request"


def test_non_object_body_is_400_problem(client_for, team):
    response = client_for(team).post(
        "/api/v1/datasets", data="[1, 2]", content_type="application/json"
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"


def test_oversized_body_is_413_problem(client_for, team, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    payload = {**ORDERS, "description": "x" * 2048}
    response = client_for(team).post("/api/v1/datasets", payload, format="json")
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert Dataset.objects.count() == 0


def test_list_datasets_filters(client_for, team, django_assert_max_num_queries):
    finance = TeamFactory(slug="finance")
    DatasetFactory(owner=team, namespace="s3://lake", name="raw/orders", criticality="high")
    DatasetFactory(
        owner=team, namespace="s3://lake", name="raw/payments", description="card payments"
    )
    DatasetFactory(
        owner=finance,
        namespace="postgres://wh:5432",
        name="fin.public.revenue",
        criticality="critical",
    )
    client = client_for(team)

    def names(**params):
        return sorted(d["name"] for d in client.get("/api/v1/datasets", params).json()["results"])

    assert names() == ["fin.public.revenue", "raw/orders", "raw/payments"]
    assert names(owner="finance") == ["fin.public.revenue"]
    assert names(namespace="S3://lake") == ["raw/orders", "raw/payments"]
    assert names(criticality="high") == ["raw/orders"]
    assert names(q="PAYMENT") == ["raw/payments"]
    assert names(name="raw/orders") == ["raw/orders"]
    with django_assert_max_num_queries(4):
        client.get("/api/v1/datasets")


def test_list_datasets_query_count_does_not_grow_with_rows(
    client_for, team, django_assert_num_queries
):
    client = client_for(team)
    client.get("/api/v1/me")  # let last_used_at settle; the key row is cached from here
    DatasetFactory.create_batch(3, owner=team)
    with django_assert_num_queries(1):  # one page
        client.get("/api/v1/datasets")
    DatasetFactory.create_batch(30, owner=TeamFactory())
    with django_assert_num_queries(1):
        client.get("/api/v1/datasets")


def test_list_datasets_paginates_with_a_cursor(client_for, team):
    DatasetFactory.create_batch(5, owner=team)
    client = client_for(team)
    first = client.get("/api/v1/datasets", {"page_size": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    seen = [d["id"] for d in first["results"]]
    page = first
    while page["next"]:
        page = client.get(page["next"]).json()
        seen += [d["id"] for d in page["results"]]
    assert sorted(seen) == sorted(Dataset.objects.values_list("id", flat=True))


def test_unknown_filter_is_400(client_for, team):
    response = client_for(team).get("/api/v1/datasets", {"ownr": "x"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "ownr"


def test_retrieve_dataset_and_404_problem(client_for, team):
    dataset = DatasetFactory(owner=team)
    client = client_for(team)
    assert client.get(f"/api/v1/datasets/{dataset.id}").json()["name"] == dataset.name
    response = client.get("/api/v1/datasets/999999")
    assert response.status_code == 404
    assert response.json()["code"] == "dataset_not_found"


def test_owner_updates_dataset_and_audit_records_old_and_new(client_for, team):
    dataset = DatasetFactory(owner=team, sla_cron="", change_notice_days=14)
    client = client_for(team)
    response = client.patch(
        f"/api/v1/datasets/{dataset.id}",
        {
            "sla_cron": "30 6 * * *",
            "sla_timezone": "Europe/Berlin",
            "change_notice_days": 30,
            "description": "d",
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    entry = AuditEntry.objects.get(dataset=dataset, action="dataset.updated")
    assert entry.changes == {
        "sla_cron": ["", "30 6 * * *"],
        "sla_timezone": ["UTC", "Europe/Berlin"],
        "change_notice_days": [14, 30],
    }
    assert entry.actor.startswith("key:")
    audit = client.get(f"/api/v1/datasets/{dataset.id}/audit").json()["results"]
    assert audit[0]["changes"]["change_notice_days"] == [14, 30]


def test_update_without_rule_changes_writes_no_audit(client_for, team):
    dataset = DatasetFactory(owner=team)
    client_for(team).patch(f"/api/v1/datasets/{dataset.id}", {"description": "new"}, format="json")
    assert not AuditEntry.objects.filter(dataset=dataset, action="dataset.updated").exists()


def test_other_team_cannot_update_dataset(client_for, team):
    dataset = DatasetFactory(owner=team, description="before")
    response = client_for(TeamFactory(slug="intruders")).patch(
        f"/api/v1/datasets/{dataset.id}", {"description": "after"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "not_dataset_owner"
    dataset.refresh_from_db()
    assert dataset.description == "before"


def test_identity_cannot_be_patched(client_for, team):
    dataset = DatasetFactory(owner=team)
    response = client_for(team).patch(
        f"/api/v1/datasets/{dataset.id}", {"name": "other"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0] == {
        "field": "name",
        "rule": "unknown",
        "detail": "unknown field (got 'other')",
        "value": "other",
    }


def test_poll_shows_the_storage_group_and_recent_sweeps(client_for, team, settings, tmp_path):
    from catalog import polling

    settings.TIDEMARK_STORAGE_SOURCES = {"lake": {"url": f"file://{tmp_path}"}}
    (tmp_path / "sales/orders/dt=2026-11-28").mkdir(parents=True)
    (tmp_path / "sales/orders/dt=2026-11-28/_SUCCESS").write_bytes(b"")
    client = client_for(team)
    created = client.post(
        "/api/v1/datasets",
        {
            "namespace": "s3://lake",
            "name": "sales/orders",
            "completion_signal": "success_marker",
            "storage_source": "lake",
            "location_template": "sales/orders/dt={partition}/",
        },
        format="json",
    ).json()
    dataset = Dataset.objects.get(pk=created["id"])
    polling.sweep_group(dataset.poll_group, now=dataset.created_at, full=True)

    body = client.get(f"/api/v1/datasets/{created['id']}/poll").json()

    assert body["polled"] is True
    assert (body["group_prefix"], body["mode"], body["interval_seconds"]) == (
        "sales/orders/",
        "adaptive",
        60,
    )
    sweep = body["recent_sweeps"][0]
    assert (sweep["list_calls"], sweep["partitions_found"], sweep["full"]) == (2, 1, True)
    assert (sweep["listing"], sweep["objects_per_partition"]) == ("delimiter", 1.0)
    assert (sweep["narrow"], sweep["datasets_listed"]) == (False, 1)
    assert sweep["error"] == ""


def test_poll_of_an_event_dataset_says_it_is_not_polled(client_for, team):
    client = client_for(team)
    created = client.post(
        "/api/v1/datasets", {"namespace": "s3://lake", "name": "events"}, format="json"
    ).json()
    body = client.get(f"/api/v1/datasets/{created['id']}/poll").json()
    assert body["polled"] is False and body["recent_sweeps"] == []
