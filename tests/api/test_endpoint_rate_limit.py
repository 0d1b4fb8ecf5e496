"""``GET``/``PATCH /api/v1/endpoints/{id}``: the rate limit, and the Retry-After throttle
shown in the endpoint's output (the team page: tests/web/test_team_page.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import ApiKey, Endpoint
from tests.catalog.factories import EndpointFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint():
    return EndpointFactory(team=TeamFactory(slug="analytics"), url="https://example.com/hook")


def test_patch_sets_and_clears_the_rate_limit(endpoint, client_for):
    client = client_for(endpoint.team)
    url = f"/api/v1/endpoints/{endpoint.pk}"
    assert client.get(url).json()["rate_limit_per_second"] is None
    body = client.patch(url, {"rate_limit_per_second": 2}, format="json").json()
    assert body["rate_limit_per_second"] == 2 and body["id"] == endpoint.pk
    assert Endpoint.objects.get(pk=endpoint.pk).rate_limit_per_second == 2
    assert client.patch(url, {}, format="json").json()["rate_limit_per_second"] == 2
    cleared = client.patch(url, {"rate_limit_per_second": None}, format="json").json()
    assert cleared["rate_limit_per_second"] is None


@pytest.mark.parametrize("value", [0, -1, 100_001, "fast", 1.5])
def test_a_bad_rate_is_a_problem_naming_the_field(endpoint, client_for, value):
    response = client_for(endpoint.team).patch(
        f"/api/v1/endpoints/{endpoint.pk}", {"rate_limit_per_second": value}, format="json"
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == ["rate_limit_per_second"]


def test_read_scope_reads_manage_scope_changes_others_see_nothing(endpoint, client_for):
    url = f"/api/v1/endpoints/{endpoint.pk}"
    reader = client_for(endpoint.team, scopes=[ApiKey.Scope.READ])
    assert reader.get(url).status_code == 200
    assert reader.patch(url, {"rate_limit_per_second": 2}, format="json").status_code == 403
    stranger = client_for(TeamFactory(slug="other"))
    assert stranger.get(url).status_code == 404
    assert stranger.patch(url, {"rate_limit_per_second": 2}, format="json").status_code == 404


def test_throttled_until_shows_in_the_endpoint_output(endpoint, client_for):
    until = timezone.now() + timedelta(seconds=30)
    Endpoint.objects.filter(pk=endpoint.pk).update(throttled_until=until)
    client = client_for(endpoint.team)
    listed = client.get("/api/v1/endpoints").json()["results"]
    assert listed[0]["throttled_until"][:19] == until.isoformat()[:19]
    one = client.get(f"/api/v1/endpoints/{endpoint.pk}").json()
    assert one["throttled_until"] == listed[0]["throttled_until"]
