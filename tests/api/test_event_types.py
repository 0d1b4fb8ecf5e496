"""GET /api/v1/event-types: the event catalog over the API."""

import pytest
from jsonschema import Draft202012Validator

from catalog.models import Notification

pytestmark = pytest.mark.django_db

URL = "/api/v1/event-types"


@pytest.mark.parametrize("scopes", [["read"], ["publish"], ["lineage"]])
def test_any_valid_key_lists_every_type_with_schema_and_example(client_for, team, scopes):
    response = client_for(team, scopes=scopes).get(URL)

    assert response.status_code == 200
    results = response.json()["results"]
    assert sorted(r["type"] for r in results) == sorted(Notification.Type.values)
    for entry in results:
        Draft202012Validator(entry["schema"]).validate(entry["example"])
        assert entry["example"]["type"] == entry["type"]


def test_one_type_by_name(client_for, team):
    response = client_for(team).get(f"{URL}/partition.ready")

    assert response.status_code == 200
    body = response.json()
    assert body["type"] == "partition.ready"
    assert body["audience"] == ["subscribers"]
    assert "backfill" in body["schema"]["properties"]["data"]["required"]
    assert body["example"]["data"]["backfill"] is False


def test_an_unknown_type_is_a_404_naming_it_and_listing_the_known_ones(client_for, team):
    response = client_for(team).get(f"{URL}/partition.exploded")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "event_type_not_found"
    assert "'partition.exploded'" in body["detail"]
    assert body["errors"] == [
        {
            "field": "type",
            "rule": "known_event_type",
            "detail": "'partition.exploded' is not an event type",
        }
    ]
    assert sorted(body["known"]) == sorted(Notification.Type.values)


def test_without_a_key_it_is_a_401(api_client):
    response = api_client.get(URL)

    assert response.status_code == 401
    assert api_client.get(f"{URL}/partition.ready").status_code == 401
