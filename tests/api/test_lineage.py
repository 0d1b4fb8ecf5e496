"""POST /api/v1/lineage (OpenLineage 2-0-2), and reading runs and their raw events."""

from __future__ import annotations

import gzip
import json
import uuid

import pytest

from catalog.models import Claim
from lineage.models import LineageEvent
from lineage.services import processing
from tests.catalog.factories import TeamFactory
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db

URL = "/api/v1/lineage"
RUNS = "/api/v1/lineage/runs"


@pytest.fixture
def team_a(db):
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    return team


@pytest.fixture
def sender(client_for, team_a):
    """A client with a key holding only the ``lineage`` scope, as a scheduler would."""
    return client_for(team_a, scopes=["lineage"])


def post(client, body, *, content_type="application/json", **headers):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(URL, data=data, content_type=content_type, **headers)


def test_post_stores_the_event_and_answers_201_with_what_it_understood(sender, team_a):
    payload = ev.run_event("START", inputs=[ev.dataset("postgres://db:5432", "a.b.c")])
    response = post(sender, payload)
    assert response.status_code == 201, response.json()
    body = response.json()
    event = LineageEvent.objects.get()
    assert body == {
        "id": event.pk,
        "kind": "run",
        "event_type": "START",
        "event_time": "2026-11-28T06:00:00Z",
        "event_time_assumed_utc": False,
        "run_id": ev.RUN_ID,
        "job": {"namespace": ev.JOB[0], "name": ev.JOB[1]},
        "team": "team-a",
        "verified": True,
        "duplicate": False,
        "problems": [],
    }
    assert event.payload == payload
    assert (event.state, event.content_encoding) == ("pending", "")


@pytest.mark.parametrize(
    "payload",
    [
        ev.run_event("START", event_time="2026-11-28T06:00:00.123456+02:00"),
        ev.run_event("OTHER", event_time="2026-11-28T06:00:00"),
        ev.run_event("START", run_facets={"nominalTime": {"nominalStartTime": 5}}),
    ],
    ids=["offset-and-microseconds", "assumed-utc", "with-problems"],
)
def test_post_answers_with_the_output_serializers_shape(sender, payload):
    from api.serializers.lineage import LineageEventReceivedOutputSerializer

    for status in (201, 200):  # new, then repeated (read back from the database)
        response = post(sender, payload)
        assert response.status_code == status, response.json()
        body = response.json()
        event = LineageEvent.objects.get(pk=body["id"])
        expected = LineageEventReceivedOutputSerializer(
            {**body, "event_time": event.event_time, "run_id": event.run_id}
        ).data
        assert body == json.loads(json.dumps(expected))


def test_post_of_the_same_event_again_answers_200_and_stores_nothing(sender):
    payload = ev.run_event("START")
    first = post(sender, payload)
    again = post(sender, payload)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["duplicate"] is True
    assert LineageEvent.objects.count() == 1


def test_post_reads_an_event_time_without_offset_as_utc_and_says_so(sender):
    response = post(sender, ev.run_event("START", event_time="2026-11-28T06:00:00.5"))
    assert response.status_code == 201
    assert response.json()["event_time"] == "2026-11-28T06:00:00.500000Z"
    assert response.json()["event_time_assumed_utc"] is True
    assert LineageEvent.objects.get().event_time_assumed_utc is True


def test_post_of_an_unclaimed_job_namespace_is_stored_unverified(client_for, team_a):
    other = client_for(TeamFactory(slug="team-b"), scopes=["lineage"])
    response = post(other, ev.run_event("START"))
    assert response.status_code == 201
    assert (response.json()["team"], response.json()["verified"]) == ("team-b", False)


def test_post_keeps_a_malformed_standard_facet_flagged(sender):
    response = post(sender, ev.SAMPLE_INVALID_DATASET_FACET)
    assert response.status_code == 201, response.json()
    assert response.json()["problems"] == [
        {
            "field": "outputs.0.facets.ownership.owners.0.name",
            "rule": "required",
            "detail": "name is required",
        }
    ]


@pytest.mark.parametrize("sample", [ev.SAMPLE_FULL, ev.SAMPLE_SIMPLE, ev.SAMPLE_SPEC_FULL])
def test_post_accepts_the_valid_sample_events(sender, sample):
    response = post(sender, sample)
    assert response.status_code == 201, response.json()
    assert response.json()["problems"] == []
    assert LineageEvent.objects.get().payload == sample


def _gzip(payload) -> bytes:
    return gzip.compress(json.dumps(payload).encode())


def test_post_inflates_a_gzip_body(sender):
    payload = ev.run_event("COMPLETE", outputs=[ev.dataset("s3://lake", "curated/orders")])
    response = post(sender, _gzip(payload), HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 201, response.json()
    event = LineageEvent.objects.get()
    assert (event.payload, event.content_encoding) == (payload, "gzip")


def test_post_has_its_own_size_limit_above_the_api_wide_one(sender, settings):
    fields = [{"name": f"column_{n:05d}", "type": "VARCHAR(255)"} for n in range(6000)]
    schema = {"_producer": ev.PRODUCER, "_schemaURL": ev.SCHEMA_URL, "fields": fields}
    payload = ev.run_event(
        "START", inputs=[ev.dataset("s3://lake", "wide", facets={"schema": schema})]
    )
    size = len(json.dumps(payload))
    assert (
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE < size < settings.TIDEMARK_LINEAGE["max_event_bytes"]
    )
    response = post(sender, payload)
    assert response.status_code == 201, response.json()


LIMIT = 4000


def _padded(size: int) -> dict:
    payload = ev.run_event("START")
    payload["run"]["facets"] = {"note": {"text": ""}}
    payload["run"]["facets"]["note"]["text"] = "x" * (size - len(json.dumps(payload)))
    assert len(json.dumps(payload)) == size
    return payload


def _bad_payloads():
    no_name = ev.run_event("START")
    del no_name["job"]["name"]
    empty_namespace = ev.run_event("START", job=("", "x"))
    no_dataset_namespace = ev.run_event("START", inputs=[{"name": "raw/orders"}])
    no_time = ev.run_event("START")
    del no_time["eventTime"]
    no_dataset_name = {
        "eventTime": "2026-11-28T06:00:00Z",
        "dataset": {"namespace": "s3://lake", "name": ""},
        "producer": ev.PRODUCER,
        "schemaURL": ev.SCHEMA_URL,
    }
    gzip_ok = {"HTTP_CONTENT_ENCODING": "gzip"}
    return [
        # (id, body, headers, status, code, field)
        ("not-json", b'{"eventTime": ', {}, 400, "malformed_request", None),
        ("empty-body", b"", {}, 400, "malformed_request", None),
        ("nan", b'{"eventTime": NaN}', {}, 400, "malformed_request", None),
        (
            "nul-in-string",
            json.dumps(ev.run_event(job=("a\x00", "b"))).encode(),
            {},
            400,
            "validation_error",
            "job.namespace",
        ),
        (
            "sample-no-run-id",
            ev.SAMPLE_NO_RUN_ID,
            {},
            422,
            "invalid_openlineage_event",
            "run.runId",
        ),
        (
            "run-id-not-uuid",
            ev.run_event(run_id="run-42"),
            {},
            422,
            "invalid_openlineage_event",
            "run.runId",
        ),
        ("no-job-name", no_name, {}, 422, "invalid_openlineage_event", "job.name"),
        (
            "empty-job-namespace",
            empty_namespace,
            {},
            422,
            "invalid_openlineage_event",
            "job.namespace",
        ),
        (
            "no-dataset-namespace",
            no_dataset_namespace,
            {},
            422,
            "invalid_openlineage_event",
            "inputs.0.namespace",
        ),
        (
            "empty-static-dataset-name",
            no_dataset_name,
            {},
            422,
            "invalid_openlineage_event",
            "dataset.name",
        ),
        ("no-event-time", no_time, {}, 422, "invalid_openlineage_event", "eventTime"),
        (
            "bad-event-time",
            ev.run_event(event_time="yesterday"),
            {},
            400,
            "invalid_event_time",
            "eventTime",
        ),
        (
            "unknown-event-type",
            ev.run_event("DONE"),
            {},
            422,
            "invalid_openlineage_event",
            "eventType",
        ),
        ("array-body", [ev.run_event()], {}, 422, "invalid_openlineage_event", "body"),
        ("too-large", _padded(LIMIT + 1), {}, 413, "payload_too_large", "body"),
        (
            "gzip-too-large-inflated",
            gzip.compress(json.dumps(_padded(LIMIT + 1)).encode()),
            gzip_ok,
            413,
            "payload_too_large",
            "body",
        ),
        ("gzip-bomb", gzip.compress(b" " * 10_000_000), gzip_ok, 413, "payload_too_large", "body"),
        ("gzip-corrupt", b"\x1f\x8b\x08\x00garbage", gzip_ok, 400, "malformed_request", "body"),
        ("gzip-truncated", _gzip(ev.run_event())[:-12], gzip_ok, 400, "malformed_request", "body"),
        (
            "not-gzip-but-says-so",
            json.dumps(ev.run_event()).encode(),
            gzip_ok,
            400,
            "malformed_request",
            "body",
        ),
        (
            "brotli",
            _gzip(ev.run_event()),
            {"HTTP_CONTENT_ENCODING": "br"},
            415,
            "unsupported_content_encoding",
            "Content-Encoding",
        ),
        (
            "form-content-type",
            ev.run_event(),
            {"content_type": "application/x-www-form-urlencoded"},
            415,
            "unsupported_media_type",
            None,
        ),
    ]


@pytest.mark.parametrize(
    ("body", "headers", "status", "code", "field"),
    [pytest.param(*case[1:], id=case[0]) for case in _bad_payloads()],
)
def test_post_of_a_bad_payload_is_a_4xx_problem_and_stores_nothing(
    sender, settings, body, headers, status, code, field
):
    settings.TIDEMARK_LINEAGE = {**settings.TIDEMARK_LINEAGE, "max_event_bytes": LIMIT}
    headers = dict(headers)
    content_type = headers.pop("content_type", "application/json")
    response = post(sender, body, content_type=content_type, **headers)
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert (problem["status"], problem["code"]) == (status, code)
    if field is not None:
        assert field in [e["field"] for e in problem["errors"]], problem
    assert not LineageEvent.objects.exists()


def test_post_needs_a_key_with_the_lineage_scope(api_client, client_for, team_a):
    response = post(api_client, ev.run_event())
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    reader = client_for(team_a, scopes=["read", "publish"])
    response = post(reader, ev.run_event())
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
    assert not LineageEvent.objects.exists()


# --- runs and raw events -----------------------------------------------------------------


@pytest.fixture
def run_processed(sender):
    """A START and a COMPLETE of one run of team-a's job, processed."""
    for event_type, minute in (("START", "00"), ("COMPLETE", "05")):
        event = ev.run_event(event_type, event_time=f"2026-11-28T06:{minute}:00Z")
        assert post(sender, event).status_code == 201
    processing.lineage_events_process_due()
    return ev.RUN_ID


def test_runs_of_a_job_are_listed_with_state_and_times(
    client_for, team_a, run_processed, django_assert_max_num_queries
):
    reader = client_for(team_a, scopes=["read"])
    params = {"job_namespace": ev.JOB[0], "job_name": ev.JOB[1]}
    with django_assert_max_num_queries(3):  # at most: the key, the page, last_used_at
        response = reader.get(RUNS, params)
    assert response.status_code == 200, response.json()
    [run] = response.json()["results"]
    assert run == {
        "run_id": ev.RUN_ID,
        "job": {"namespace": ev.JOB[0], "name": ev.JOB[1]},
        "state": "complete",
        "started_at": "2026-11-28T06:00:00Z",
        "ended_at": "2026-11-28T06:05:00Z",
        "last_event_at": "2026-11-28T06:05:00Z",
        "parent_run_id": None,
        "parent_job": None,
        "team": "team-a",
        "verified": True,
    }
    assert reader.get(RUNS, {**params, "state": "running"}).json()["results"] == []
    assert reader.get(RUNS, {**params, "job_name": "other"}).json()["results"] == []


def test_runs_need_both_job_query_parameters(client_for, team_a):
    response = client_for(team_a, scopes=["read"]).get(RUNS, {"job_name": ev.JOB[1]})
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["job_namespace"]


def test_runs_and_events_are_hidden_from_other_teams_but_not_from_governance(
    client_for, run_processed
):
    outsider = client_for(TeamFactory(slug="team-b"), scopes=["read"])
    params = {"job_namespace": ev.JOB[0], "job_name": ev.JOB[1]}
    assert outsider.get(RUNS, params).json()["results"] == []
    response = outsider.get(f"{RUNS}/{run_processed}/events")
    assert (response.status_code, response.json()["code"]) == (404, "run_not_found")

    auditor = client_for(TeamFactory(slug="governance"), scopes=["governance"])
    assert [r["run_id"] for r in auditor.get(RUNS, params).json()["results"]] == [run_processed]
    assert auditor.get(f"{RUNS}/{run_processed}/events").status_code == 200


def test_the_raw_events_of_a_run_are_listed_in_event_time_order(
    client_for, team_a, run_processed, django_assert_max_num_queries
):
    reader = client_for(team_a, scopes=["read"])
    with django_assert_max_num_queries(4):  # at most: the key, the run, the page, last_used_at
        response = reader.get(f"{RUNS}/{run_processed}/events")
    assert response.status_code == 200, response.json()
    events = response.json()["results"]
    assert [e["event_type"] for e in events] == ["START", "COMPLETE"]
    assert {e["state"] for e in events} == {"processed"}
    assert events[0]["payload"]["job"] == {"namespace": ev.JOB[0], "name": ev.JOB[1]}
    assert (events[0]["team"], events[0]["verified"]) == ("team-a", True)
    assert {e["conflict"] for e in events} == {None}


def test_the_events_of_an_unknown_run_are_404(client_for, team_a):
    response = client_for(team_a, scopes=["read"]).get(f"{RUNS}/{uuid.uuid4()}/events")
    assert response.status_code == 404
