"""Hostile input against the newest API surface: endpoint recovery and the delivery log,
an endpoint's rate limit, subscription need-by times, the needed-earlier report and the
freshness forecast. Never a 5xx; every refusal is an RFC 9457 problem naming the field;
another team's endpoint is a 404, never acted on."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import ApiKey, Delivery, Endpoint, Notification, Subscription
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def _problem(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    return response.json()


def _field_error(response, status: int, field: str) -> dict:
    body = _problem(response, status)
    named = [e for e in body.get("errors", []) if e["field"] == field]
    assert named, body
    return named[0]


@pytest.fixture
def mine(team):
    """The caller's team's subscription, through its own webhook endpoint."""
    return SubscriptionFactory(team=team, dataset=DatasetFactory(sla_cron="0 9 * * *"))


@pytest.fixture
def owner(client_for, team):
    return client_for(team)


@pytest.fixture
def theirs():
    """Another team's subscription and endpoint, with a dead letter to recover."""
    return SubscriptionFactory(team=TeamFactory(slug="elsewhere"))


# --- POST /endpoints/{id}/recover ----------------------------------------------------------

RECOVER_SINCE = [
    pytest.param({}, "required", id="missing"),
    pytest.param({"since": None}, "null", id="null"),
    pytest.param({"since": "yesterday"}, "invalid", id="not a date"),
    pytest.param({"since": 1700000000}, "invalid", id="a number"),
    pytest.param({"since": ["2026-01-01T00:00:00Z"]}, "invalid", id="a list"),
    pytest.param({"since": {"at": "x"}}, "invalid", id="an object"),
    pytest.param({"since": "0001-01-01T00:00:00Z"}, "max_window", id="year 1"),
    pytest.param({"since": "0001-01-01T00:00:00+05:00"}, None, id="year 1 east of UTC"),
    pytest.param({"since": "9999-12-31T23:59:59Z"}, "not_in_future", id="year 9999"),
    pytest.param({"since": "9999-12-31T23:59:59-05:00"}, None, id="year 9999 west of UTC"),
    pytest.param({"since": "3000-01-01T00:00:00Z"}, "not_in_future", id="far future"),
    pytest.param({"since": "2026-13-45T00:00:00Z"}, "invalid", id="month 13"),
    pytest.param({"since": "2026-01-01T00:00:00\u0000Z"}, "text", id="NUL"),
    pytest.param({"since": "x" * 100_000}, "invalid", id="very long"),
]


@pytest.mark.parametrize(("body", "code"), RECOVER_SINCE)
def test_recover_refuses_a_bad_since_naming_it(owner, mine, body, code):
    response = owner.post(f"/api/v1/endpoints/{mine.endpoint_id}/recover", body, format="json")
    assert response.status_code in (400, 422), response.content
    error = _field_error(response, response.status_code, "since")
    if code:
        assert error["rule"] == code, error
    assert error["detail"]


def test_recover_accepts_a_naive_since_as_utc(owner, mine):
    naive = (timezone.now() - timedelta(hours=1)).replace(tzinfo=None).isoformat()
    response = owner.post(
        f"/api/v1/endpoints/{mine.endpoint_id}/recover", {"since": naive}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["queued"] == 0


def test_recover_of_another_teams_endpoint_is_a_404_and_queues_nothing(owner, theirs):
    dead = Delivery.objects.create(
        endpoint=theirs.endpoint,
        notification=_notification(),
        state=Delivery.State.DEAD,
        next_attempt_at=timezone.now(),
    )
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    response = owner.post(
        f"/api/v1/endpoints/{theirs.endpoint_id}/recover", {"since": since}, format="json"
    )
    _problem(response, 404)
    dead.refresh_from_db()
    assert dead.state == Delivery.State.DEAD


def test_recover_goes_by_when_the_notification_was_made(owner, mine):
    # A subscription's catch-up (``since``) makes deliveries now of notifications made
    # days ago: "of notifications made at or after since" leaves those out.
    old, recent = _notification(), _notification()
    Notification.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))
    Notification.objects.filter(pk=recent.pk).update(
        created_at=timezone.now() - timedelta(minutes=30)
    )
    for notification in (old, recent):
        Delivery.objects.create(
            endpoint=mine.endpoint,
            notification=notification,
            state=Delivery.State.DEAD,
            next_attempt_at=timezone.now(),
        )
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    response = owner.post(
        f"/api/v1/endpoints/{mine.endpoint_id}/recover", {"since": since}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["queued"] == 1
    assert Delivery.objects.get(notification=old).state == Delivery.State.DEAD
    assert Delivery.objects.get(notification=recent).state == Delivery.State.PENDING


def test_recover_of_a_disabled_endpoint_is_a_409(owner, mine):
    Endpoint.objects.filter(pk=mine.endpoint_id).update(is_active=False, disabled_reason="failing")
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    response = owner.post(
        f"/api/v1/endpoints/{mine.endpoint_id}/recover", {"since": since}, format="json"
    )
    assert _problem(response, 409)["code"] == "endpoint_disabled"


def test_recover_needs_manage_and_a_live_key(client_for, team, mine, make_key, api_client):
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    url = f"/api/v1/endpoints/{mine.endpoint_id}/recover"
    reader = client_for(team, scopes=[ApiKey.Scope.READ])
    assert _problem(reader.post(url, {"since": since}, format="json"), 403)
    token = make_key(team)
    ApiKey.objects.filter(team=team).update(revoked_at=timezone.now())
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert _problem(api_client.post(url, {"since": since}, format="json"), 401)


def _notification():
    return Notification.objects.create(
        type="partition.ready", dedup_key=str(uuid.uuid4()), payload={}
    )


# --- GET /endpoints/{id}/attempts ----------------------------------------------------------

ATTEMPT_FILTERS = [
    pytest.param({"outcome": "bogus"}, "outcome", id="outcome bogus"),
    pytest.param({"status_code": "abc"}, "status_code", id="status abc"),
    pytest.param({"status_code": "99999"}, "status_code", id="status 99999"),
    pytest.param({"status_code": "-1"}, "status_code", id="status -1"),
    pytest.param({"status_code": "9" * 40}, "status_code", id="status huge"),
    pytest.param({"since": "garbage"}, "since", id="since garbage"),
    pytest.param({"since": "0001-01-01T00:00:00+05:00"}, "since", id="since year 1 east"),
    pytest.param({"since": "9999-12-31T23:59:59-05:00"}, "since", id="since year 9999 west"),
    pytest.param({"cursor": "garbage"}, "cursor", id="cursor garbage"),
    pytest.param({"page_size": "0"}, "page_size", id="page_size 0"),
    pytest.param({"page_size": "100000"}, "page_size", id="page_size 100000"),
    pytest.param({"page_size": "-5"}, "page_size", id="page_size negative"),
    pytest.param({"frobnicate": "1"}, "frobnicate", id="unknown parameter"),
]


@pytest.mark.parametrize(("query", "field"), ATTEMPT_FILTERS)
def test_attempt_log_refuses_bad_filters_naming_them(owner, mine, query, field):
    response = owner.get(f"/api/v1/endpoints/{mine.endpoint_id}/attempts", query)
    error = _field_error(response, 400, field)
    assert error["detail"]


def test_attempt_log_of_another_teams_endpoint_is_a_404(owner, theirs):
    _problem(owner.get(f"/api/v1/endpoints/{theirs.endpoint_id}/attempts"), 404)


# --- GET/PATCH /endpoints/{id} -------------------------------------------------------------

RATE_LIMITS = [
    pytest.param(0, id="zero"),
    pytest.param(-1, id="negative"),
    pytest.param(10**9, id="1e9"),
    pytest.param(2**31, id="2^31"),
    pytest.param(2**63, id="2^63"),
    pytest.param(10**40, id="10^40"),
    pytest.param(1.5, id="fraction"),
    pytest.param(True, id="true"),
    pytest.param("ten", id="a word"),
    pytest.param([10], id="a list"),
    pytest.param(float("1e308"), id="1e308"),
]


@pytest.mark.parametrize("value", RATE_LIMITS)
def test_a_bad_rate_limit_is_refused_and_leaves_the_endpoint(owner, mine, value):
    Endpoint.objects.filter(pk=mine.endpoint_id).update(rate_limit_per_second=7)
    response = owner.patch(
        f"/api/v1/endpoints/{mine.endpoint_id}", {"rate_limit_per_second": value}, format="json"
    )
    assert _field_error(response, 400, "rate_limit_per_second")["detail"]
    assert Endpoint.objects.get(pk=mine.endpoint_id).rate_limit_per_second == 7


def test_a_rate_limit_as_a_numeric_string_and_null(owner, mine):
    url = f"/api/v1/endpoints/{mine.endpoint_id}"
    response = owner.patch(url, {"rate_limit_per_second": "10"}, format="json")
    assert response.status_code == 200 and response.json()["rate_limit_per_second"] == 10
    response = owner.patch(url, {"rate_limit_per_second": None}, format="json")
    assert response.status_code == 200 and response.json()["rate_limit_per_second"] is None


def test_an_unknown_field_on_an_endpoint_is_named(owner, mine):
    response = owner.patch(
        f"/api/v1/endpoints/{mine.endpoint_id}", {"url": "https://evil.example"}, format="json"
    )
    assert _field_error(response, 400, "url")
    assert Endpoint.objects.get(pk=mine.endpoint_id).url == mine.endpoint.url


def test_another_teams_endpoint_is_a_404_and_unchanged(owner, theirs):
    url = f"/api/v1/endpoints/{theirs.endpoint_id}"
    _problem(owner.get(url), 404)
    _problem(owner.patch(url, {"rate_limit_per_second": 1}, format="json"), 404)
    assert Endpoint.objects.get(pk=theirs.endpoint_id).rate_limit_per_second is None


def test_a_read_key_may_not_change_the_rate(client_for, team, mine):
    reader = client_for(team, scopes=[ApiKey.Scope.READ])
    url = f"/api/v1/endpoints/{mine.endpoint_id}"
    assert reader.get(url).status_code == 200
    _problem(reader.patch(url, {"rate_limit_per_second": 1}, format="json"), 403)


# --- need-by on POST/PATCH /subscriptions --------------------------------------------------

NEED_BYS = [
    pytest.param({"need_by_cron": "@daily"}, "need_by_cron", id="@daily"),
    pytest.param({"need_by_cron": "0 0 9 * * *"}, "need_by_cron", id="6 fields"),
    pytest.param({"need_by_cron": "0 0 30 2 *"}, "need_by_cron", id="never fires"),
    pytest.param({"need_by_cron": "x" * 5000}, "need_by_cron", id="very long cron"),
    pytest.param({"need_by_cron": None}, "need_by_cron", id="null cron"),
    pytest.param({"need_by_cron": 9}, "need_by_cron", id="number cron"),
    pytest.param({"need_by_cron": ["0 9 * * *"]}, "need_by_cron", id="list cron"),
    pytest.param({"need_by_cron": "0 9 * * *\u0000"}, "need_by_cron", id="NUL cron"),
    pytest.param({"need_by_timezone": "../../etc"}, "need_by_timezone", id="traversal zone"),
    pytest.param({"need_by_timezone": "/etc/localtime"}, "need_by_timezone", id="absolute zone"),
    pytest.param({"need_by_timezone": ""}, "need_by_timezone", id="empty zone"),
    pytest.param({"need_by_timezone": "   "}, "need_by_timezone", id="blank zone"),
    pytest.param({"need_by_timezone": None}, "need_by_timezone", id="null zone"),
    pytest.param({"need_by_timezone": "Mars/Olympus"}, "need_by_timezone", id="unknown zone"),
    pytest.param({"need_by_timezone": "E" * 5000}, "need_by_timezone", id="very long zone"),
]


@pytest.mark.parametrize(("fields", "field"), NEED_BYS)
def test_a_bad_need_by_is_refused_on_create(owner, fields, field):
    dataset = DatasetFactory(sla_cron="0 9 * * *")
    body = {"dataset_id": dataset.pk, "need_by_cron": "0 8 * * *", **fields}
    response = owner.post("/api/v1/subscriptions", body, format="json")
    assert _field_error(response, 400, field)["detail"]
    assert not Subscription.objects.filter(dataset=dataset).exists()


@pytest.mark.parametrize(("fields", "field"), NEED_BYS)
def test_a_bad_need_by_is_refused_on_update_and_changes_nothing(owner, mine, fields, field):
    Subscription.objects.filter(pk=mine.pk).update(
        need_by_cron="0 8 * * *", need_by_timezone="Europe/Paris"
    )
    response = owner.patch(f"/api/v1/subscriptions/{mine.pk}", fields, format="json")
    assert _field_error(response, 400, field)["detail"]
    mine.refresh_from_db()
    assert (mine.need_by_cron, mine.need_by_timezone) == ("0 8 * * *", "Europe/Paris")


def test_a_whitespace_cron_is_no_need_by(owner, mine):
    response = owner.patch(
        f"/api/v1/subscriptions/{mine.pk}", {"need_by_cron": "   "}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["need_by_cron"] == ""


@pytest.mark.parametrize("method", ["post", "patch"])
def test_a_need_by_on_an_unpartitioned_dataset_is_refused(owner, team, method):
    dataset = DatasetFactory(partitioning="none")
    if method == "post":
        response = owner.post(
            "/api/v1/subscriptions",
            {"dataset_id": dataset.pk, "need_by_cron": "0 8 * * *"},
            format="json",
        )
    else:
        subscription = SubscriptionFactory(team=team, dataset=dataset)
        response = owner.patch(
            f"/api/v1/subscriptions/{subscription.pk}", {"need_by_cron": "0 8 * * *"}, format="json"
        )
    assert _field_error(response, 400, "need_by_cron")["rule"] == "partitioned_dataset"
    assert not Subscription.objects.filter(dataset=dataset).exclude(need_by_cron="").exists()


def test_another_teams_subscription_need_by_is_a_404(owner, theirs):
    response = owner.patch(
        f"/api/v1/subscriptions/{theirs.pk}", {"need_by_cron": "0 1 * * *"}, format="json"
    )
    _problem(response, 404)
    theirs.refresh_from_db()
    assert theirs.need_by_cron == ""


# --- GET /reports/needed-earlier -----------------------------------------------------------


def test_the_report_of_another_team_needs_governance(client_for, team, theirs):
    reader = client_for(team, scopes=[ApiKey.Scope.READ])
    response = reader.get("/api/v1/reports/needed-earlier", {"team": "elsewhere"})
    _problem(response, 403)


def test_the_report_of_no_such_team(client_for, team):
    # Without governance a stranger's slug is refused the same whether it exists or not,
    # so slugs cannot be probed.
    reader = client_for(team, scopes=[ApiKey.Scope.READ])
    _problem(reader.get("/api/v1/reports/needed-earlier", {"team": "nobody-here"}), 403)
    governor = client_for(team, scopes=[ApiKey.Scope.READ, ApiKey.Scope.GOVERNANCE])
    response = governor.get("/api/v1/reports/needed-earlier", {"team": "nobody-here"})
    assert _problem(response, 404)["code"] == "team_not_found"


@pytest.mark.parametrize(
    "query",
    [{"team": "x" * 5000}, {"cursor": "garbage"}, {"page_size": "0"}],
    ids=["long team", "bad cursor", "page_size 0"],
)
def test_the_report_refuses_hostile_query(owner, query):
    response = owner.get("/api/v1/reports/needed-earlier", query)
    assert 400 <= response.status_code < 500, response.content
    assert response["Content-Type"].startswith(PROBLEM)


# --- GET /datasets/{id}/freshness ----------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"partitioning": "none"},
        {"partitioning": "none", "sla_cron": "0 9 * * *"},
        {"partitioning": "hourly", "sla_cron": "15 * * * *"},
        {"partitioning": "daily"},
        {"partitioning": "monthly", "sla_cron": "0 9 2 * *", "sla_timezone": "Pacific/Chatham"},
    ],
    ids=["unpartitioned", "unpartitioned with SLA", "hourly", "no SLA", "monthly Chatham"],
)
def test_freshness_of_odd_datasets(owner, team, fields):
    dataset = DatasetFactory(owner=team, **fields)
    response = owner.get(f"/api/v1/datasets/{dataset.pk}/freshness")
    assert response.status_code == 200, response.content


def test_freshness_with_a_lineage_cycle(owner, team):
    from tests.catalog.test_root_causes import job_between

    a, b, c = (DatasetFactory(owner=team, sla_cron="0 9 * * *") for _ in range(3))
    for n, (source, target) in enumerate(((a, b), (b, c), (c, a))):
        job_between(team, f"job-{n}", source, target)
    for dataset in (a, b, c):
        response = owner.get(f"/api/v1/datasets/{dataset.pk}/freshness")
        assert response.status_code == 200, response.content
        assert response.json()["forecast"]["basis"]
    # c's due partition fails: a, which reads it, is blocked; the cycle still ends.
    partition = response.json()["forecast"]["partition"]
    failed = owner.post(
        "/api/v1/readiness",
        {"namespace": c.namespace, "name": c.name, "partition": partition, "state": "failed"},
        format="json",
    )
    assert failed.status_code == 201, failed.content
    for dataset in (a, b):
        response = owner.get(f"/api/v1/datasets/{dataset.pk}/freshness")
        assert response.status_code == 200, response.content
        forecast = response.json()["forecast"]
        assert forecast["blocked"] and forecast["estimate_at"] is None, (dataset.name, forecast)


def test_the_rate_limit_help_names_the_deployments_default(settings):
    from api.serializers.endpoints import EndpointUpdateInputSerializer

    default = settings.TIDEMARK_DELIVERY["endpoint_rate_per_second"]
    help_text = EndpointUpdateInputSerializer().fields["rate_limit_per_second"].help_text
    assert f"{default} by default" in help_text


@pytest.mark.parametrize("raw", ["null", "[]", '"since"', "1", "{", '{"since": "\\ud800"}'])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/recover"),
        ("patch", ""),
    ],
)
def test_a_body_that_is_not_an_object_is_a_400(owner, mine, raw, method, path):
    url = f"/api/v1/endpoints/{mine.endpoint_id}{path}"
    response = getattr(owner, method)(url, raw, content_type="application/json")
    assert 400 <= response.status_code < 500, response.content
    assert response["Content-Type"].startswith(PROBLEM)


def _cursor(raw: str) -> str:
    import base64

    return base64.b64encode(raw.encode()).decode()


CRAFTED_CURSORS = [
    "o=0&r=0&p=99999999999999999999",
    "o=0&r=1&p=-99999999999999999999",
    "o=0&p=1e400",
    "o=99999999999999999999&p=1",
    "o=-1&p=1",
    "o=0&p=a%00b",
    "o=0&p=",
]


@pytest.mark.parametrize("raw", CRAFTED_CURSORS)
@pytest.mark.parametrize("which", ["attempts", "report"])
def test_a_crafted_cursor_is_never_a_500(owner, mine, raw, which):
    url = (
        f"/api/v1/endpoints/{mine.endpoint_id}/attempts"
        if which == "attempts"
        else "/api/v1/reports/needed-earlier"
    )
    response = owner.get(url, {"cursor": _cursor(raw)})
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert _field_error(response, 400, "cursor")["detail"]


def test_a_catch_up_too_far_back_leaves_no_subscription_nor_endpoint(owner):
    dataset = DatasetFactory(sla_cron="0 9 * * *")
    endpoints = Endpoint.objects.count()
    response = owner.post(
        "/api/v1/subscriptions",
        {
            "dataset_id": dataset.pk,
            "endpoint_url": "https://hooks.example.com/late",
            "need_by_cron": "0 8 * * *",
            "since": "2000-01-01T00:00:00Z",
        },
        format="json",
    )
    assert _field_error(response, 400, "since")["rule"] == "max_age"
    assert not Subscription.objects.filter(dataset=dataset).exists()
    assert Endpoint.objects.count() == endpoints


# --- POST/DELETE /subscriptions/{id}/endpoints ---------------------------------------------

ADD_ENDPOINT = [
    pytest.param({}, "url", id="missing"),
    pytest.param({"url": None}, "url", id="null"),
    pytest.param({"url": ["https://a.example/h"]}, "url", id="a list"),
    pytest.param({"url": "https://" + "a" * 5000 + ".example/h"}, "url", id="very long"),
    pytest.param({"url": "ftp://a.example/h"}, "url", id="not https"),
    pytest.param({"url": "https://user:pw@a.example/h"}, "url", id="credentials"),
    pytest.param({"url": "https://10.0.0.1/h"}, "url", id="a private address"),
    pytest.param({"url": "https://a.example/\u0000"}, "url", id="NUL"),
    pytest.param({"url": "https://a.example/h", "since": "yesterday"}, "since", id="bad since"),
    pytest.param(
        {"url": "https://a.example/h", "since": "2001-01-01T00:00:00Z"}, "since", id="old since"
    ),
    pytest.param({"url": "https://a.example/h", "extra": 1}, "extra", id="unknown field"),
]


@pytest.mark.parametrize(("body", "field"), ADD_ENDPOINT)
def test_adding_a_bad_endpoint_is_refused_naming_the_field_and_adds_nothing(
    owner, mine, body, field
):
    response = owner.post(f"/api/v1/subscriptions/{mine.pk}/endpoints", body, format="json")
    _field_error(response, 400, field)
    assert Endpoint.objects.filter(team=mine.team).count() == 1
    assert not mine.more_endpoints.exists()


@pytest.mark.parametrize("body", [[], "x", 5, None], ids=["list", "string", "number", "null"])
def test_an_endpoint_body_that_is_not_an_object_is_a_400(owner, mine, body):
    response = owner.post(f"/api/v1/subscriptions/{mine.pk}/endpoints", body, format="json")
    _problem(response, 400)


@pytest.mark.parametrize("path", ["0", "99999999999999999999", str(2**63)])
def test_odd_subscription_and_endpoint_ids_are_404s(owner, mine, path):
    url = "https://a.example/h"
    added = owner.post(f"/api/v1/subscriptions/{path}/endpoints", {"url": url}, format="json")
    assert added.status_code == 404
    removed = owner.delete(f"/api/v1/subscriptions/{mine.pk}/endpoints/{path}")
    assert _problem(removed, 404)["code"] == "endpoint_not_found"
    assert Subscription.objects.get(pk=mine.pk).endpoint_id is not None


def test_another_teams_subscription_takes_no_endpoint_and_loses_none(owner, theirs):
    added = owner.post(
        f"/api/v1/subscriptions/{theirs.pk}/endpoints",
        {"url": "https://a.example/h"},
        format="json",
    )
    assert _problem(added, 404)["code"] == "subscription_not_found"
    removed = owner.delete(f"/api/v1/subscriptions/{theirs.pk}/endpoints/{theirs.endpoint_id}")
    assert _problem(removed, 404)["code"] == "subscription_not_found"
    assert Subscription.objects.get(pk=theirs.pk).endpoint_id is not None
