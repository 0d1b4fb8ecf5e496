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
