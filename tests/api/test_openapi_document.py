"""The committed OpenAPI documents match the code, and say what they must.

Regenerate with:
    .venv/bin/python manage.py spectacular --file docs/openapi.yaml
    .venv/bin/python manage.py spectacular --urlconf config.urls_watchdog \\
        --custom-settings watchdog.openapi.SPECTACULAR_SETTINGS --file docs/openapi-watchdog.yaml
"""

from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from jsonschema import Draft202012Validator

DOCS = Path(__file__).resolve().parents[2] / "docs"
CATALOG = ["spectacular"]
WATCHDOG = [
    *("spectacular", "--urlconf", "config.urls_watchdog"),
    *("--custom-settings", "watchdog.openapi.SPECTACULAR_SETTINGS"),
]
DOCUMENTS = {"openapi.yaml": CATALOG, "openapi-watchdog.yaml": WATCHDOG}
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


def _generated(tmp_path: Path, name: str) -> str:
    target = tmp_path / name
    call_command(*DOCUMENTS[name], "--file", str(target), "--validate", "--fail-on-warn")
    return target.read_text()


@pytest.mark.parametrize("name", DOCUMENTS)
def test_committed_openapi_document_is_current(tmp_path, name):
    assert _generated(tmp_path, name) == (DOCS / name).read_text(), (
        f"docs/{name} is stale: regenerate it (see this module's docstring)"
    )


def _operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield f"{method.upper()} {path}", operation


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_operation_is_summarised_and_its_errors_are_problem_documents(name):
    document = yaml.safe_load((DOCS / name).read_text())
    assert document["openapi"] == "3.1.0"
    problem = document["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail", "code"}
    for label, operation in _operations(document):
        assert operation.get("summary"), f"{label} has no summary"
        statuses = {int(code) for code in operation["responses"]}
        assert {400, 503} <= statuses, label
        if operation.get("security"):
            assert 401 in statuses, label
        for code, response in operation["responses"].items():
            if int(code) >= 400 and int(code) != 414:
                schema = response["content"]["application/problem+json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Problem"}, (label, code)


def test_lists_are_documented_as_the_cursor_pages_they_are():
    document = yaml.safe_load((DOCS / "openapi.yaml").read_text())
    schemas = document["components"]["schemas"]
    ref = document["paths"]["/api/v1/datasets"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]["schema"]["$ref"]
    page = schemas[ref.rsplit("/", 1)[1]]
    assert page["required"] == ["next", "previous", "results"]
    assert page["properties"]["next"]["type"] == ["string", "null"]
    me = document["paths"]["/api/v1/me"]["get"]["responses"]["200"]["content"]
    me_schema = schemas[me["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]
    assert set(me_schema["required"]) == {"team", "key"}


def test_the_marquez_compatible_endpoints_stay_out_of_the_document():
    paths = yaml.safe_load((DOCS / "openapi.yaml").read_text())["paths"]
    assert "get" not in paths["/api/v1/lineage"]
    assert not [p for p in paths if p.startswith(("/api/v1/namespaces", "/api/v1/jobs"))]
    assert "/api/v1/search" not in paths and "/api/v1/column-lineage" not in paths


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_operation_is_described_with_examples(name):
    """Issue 20: every operation says what it does beyond its summary, shows a request
    body when it takes one and a successful answer when it has a body."""
    document = yaml.safe_load((DOCS / name).read_text())
    for label, operation in _operations(document):
        assert operation.get("description"), f"{label} has no description"
        for media_type, content in operation.get("requestBody", {}).get("content", {}).items():
            assert content.get("examples"), f"{label} has no {media_type} request example"
        successes = [r for code, r in operation["responses"].items() if code.startswith("2")]
        bodies = [c for r in successes for c in r.get("content", {}).values()]
        if bodies:  # a 204 has nothing to show
            assert any(c.get("examples") for c in bodies), f"{label} has no 2xx example"


def _examples(document: dict):
    """``(where, schema, value)`` of every request and response body example."""
    for label, operation in _operations(document):
        bodies = [("request", operation.get("requestBody", {}))]
        bodies += [(code, response) for code, response in operation["responses"].items()]
        for where, body in bodies:
            for media_type, content in body.get("content", {}).items():
                for example_name, example in content.get("examples", {}).items():
                    yield (
                        f"{label} {where} {media_type} {example_name}",
                        content["schema"],
                        example["value"],
                    )


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_example_is_valid_against_its_schema(name):
    """Each example validates against its body's schema (OpenAPI 3.1's schemas are JSON
    Schema 2020-12; ``#/components/...`` references resolve within the document)."""
    document = yaml.safe_load((DOCS / name).read_text())
    found = 0
    for where, schema, value in _examples(document):
        found += 1
        validator = Draft202012Validator(
            {**schema, "components": document["components"]},
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]
        assert not errors, (where, errors)
    assert found
