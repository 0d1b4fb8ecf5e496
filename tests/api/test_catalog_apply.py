import pytest

from catalog.models import Dataset

pytestmark = pytest.mark.django_db

YAML = b"""
team: orders
datasets:
  - namespace: s3://lake
    name: raw/orders
    criticality: high
    sla_cron: "0 6 * * *"
"""


def _post(client, body, dry_run=None, content_type="application/yaml"):
    url = "/api/v1/catalog/apply"
    if dry_run is not None:
        url += f"?dry_run={'true' if dry_run else 'false'}"
    return client.post(url, body, content_type=content_type)


def test_dry_run_is_the_default_and_shows_the_diff(client_for, team):
    response = _post(client_for(team), YAML)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["dry_run"] is True and body["changed"] is True
    assert body["datasets"][0]["action"] == "create"
    assert body["datasets"][0]["changes"]["criticality"] == {"old": None, "new": "high"}
    assert not Dataset.objects.exists()


def test_apply_then_apply_again_is_a_no_op(client_for, team):
    client = client_for(team)
    assert _post(client, YAML, dry_run=False).json()["changed"] is True
    assert Dataset.objects.get().criticality == "high"
    again = _post(client, YAML, dry_run=False).json()
    assert again["changed"] is False
    assert again["datasets"][0]["action"] == "unchanged"


def test_json_body_is_accepted(client_for, team):
    doc = {"team": "orders", "datasets": [{"namespace": "s3://lake", "name": "raw/x"}]}
    response = client_for(team).post("/api/v1/catalog/apply?dry_run=false", doc, format="json")
    assert response.status_code == 200, response.json()
    assert Dataset.objects.filter(name="raw/x").exists()


def test_bad_yaml_is_a_400_problem(client_for, team):
    response = _post(client_for(team), b"team: [", dry_run=False)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_declaration"
    assert body["errors"][0]["field"] == "body"


def test_invalid_field_is_a_400_naming_the_path(client_for, team):
    response = _post(client_for(team), YAML.replace(b"0 6 * * *", b"61 * * * *"), dry_run=False)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "datasets[0].sla_cron"
    assert not Dataset.objects.exists()


def test_a_file_naming_another_team_is_403(client_for, team):
    response = _post(client_for(team), YAML.replace(b"team: orders", b"team: billing"))
    assert response.status_code == 403
    assert response.json()["code"] == "declaration_for_another_team"


def test_needs_the_manage_scope(client_for, team):
    response = _post(client_for(team, scopes=["read"]), YAML)
    assert response.status_code == 403


def test_lifecycle_rule_refuses_the_whole_apply(client_for, team):
    body = YAML + b"    lifecycle: deprecated\n    sunset_at: 2099-01-01T00:00:00Z\n"
    response = _post(client_for(team), body, dry_run=False)
    assert response.status_code == 409
    problem = response.json()
    assert problem["code"] == "lifecycle_notice_required"
    assert problem["errors"][0]["field"] == "datasets[0].lifecycle"
    assert not Dataset.objects.exists()


@pytest.mark.parametrize("content_type", ["application/yaml", "application/json"])
def test_a_body_over_the_request_limit_is_413_in_yaml_as_in_json(
    client_for, team, settings, content_type
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000  # TIDEMARK_MAX_BODY_BYTES
    body = b'{"team": "orders", "datasets": [], "pad": "' + b"x" * 1000 + b'"}'
    response = _post(client_for(team), body, dry_run=False, content_type=content_type)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert _post(client_for(team), body[:990] + b'"}', content_type=content_type).status_code == 400


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        (b"team: " + b"[" * 5000 + b"]" * 5000, "body", "depth"),
        (
            b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            b"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
            b"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
            b"team: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
            "body",
            "max_values",
        ),
        (b"a: &a [*a]", "body", "yaml_alias"),
        (YAML.replace(b"raw/orders", b'"raw/\\0orders"'), "datasets[0].name", "text"),
    ],
)
def test_yaml_beyond_the_json_limits_is_a_400_naming_the_rule(client_for, team, body, field, rule):
    response = _post(client_for(team), body, dry_run=False)
    assert response.status_code == 400, response.json()
    problem = response.json()
    assert (problem["code"], problem["errors"][0]["field"], problem["errors"][0]["rule"]) == (
        "invalid_declaration",
        field,
        rule,
    )
    assert not Dataset.objects.exists()
