"""Every problem document's ``type`` resolves to a page describing it (RFC 9457 3.1.1), on
the catalog and on the watchdog deployed alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings
from django.urls import clear_url_caches
from django.utils.html import escape

from httpkit import problem_types
from httpkit.exceptions import _DRF_CODES
from problems import Problem

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
CATALOG = ("api", "catalog", "lineage", "httpkit", "problems")  # the watchdog: its own server
# problem_document(code="...") calls, and code = "..." on Problem subclasses
LITERALS = (
    re.compile(r'problem_document\(\s*code="([a-z][a-z0-9_]*)"'),
    re.compile(r'^\s+code = "([a-z][a-z0-9_]*)"', re.M),
)


def codes_in_source(*apps: str) -> set[str]:
    codes = set()
    for app in apps:
        for path in (REPO / app).rglob("*.py"):
            if "migrations" not in path.parts:
                for literal in LITERALS:
                    codes.update(literal.findall(path.read_text()))
    return codes - {Problem.code}


def test_every_code_in_the_source_has_a_page_on_the_catalog(client):
    known = problem_types.known_types()
    codes = codes_in_source(*CATALOG) | {code for code, _ in _DRF_CODES.values()}

    assert codes - set(known) == set()
    for code in codes:
        response = client.get(f"/problems/{code.replace('_', '-')}", HTTP_ACCEPT="text/html")
        assert response.status_code == 200, code
        assert escape(known[code].title) in response.content.decode()


@override_settings(ROOT_URLCONF="config.urls_watchdog")
def test_the_watchdog_alone_describes_its_own_problems():
    clear_url_caches()
    try:
        client = Client()
        for code in codes_in_source("watchdog", "httpkit", "problems"):
            response = client.get(f"/problems/{code.replace('_', '-')}")
            assert response.status_code == 200, code
    finally:
        clear_url_caches()


def test_a_problem_from_the_api_points_at_its_page(api_client):
    problem = api_client.get("/api/v1/datasets").json()  # no key
    assert problem["type"] == "/problems/not-authenticated"

    page = api_client.get(problem["type"], HTTP_ACCEPT="application/json")

    assert page.status_code == 200
    assert page.json() == {
        "type": "/problems/not-authenticated",
        "code": "not_authenticated",
        "title": problem["title"],
        "status": 401,
        "description": page.json()["description"],
    }
    assert "Authorization: Bearer" in page.json()["description"]


def test_the_list_names_every_type_and_an_unknown_type_is_404(client):
    listed = client.get("/problems/", HTTP_ACCEPT="application/json").json()["problem_types"]
    assert [t["code"] for t in listed] == list(problem_types.known_types())
    assert client.get("/problems/dataset-not-found").status_code == 200
    assert client.get("/problems/no-such-problem").status_code == 404
    assert client.get("/problems/dataset_not_found").status_code == 404  # dashes only


def test_the_committed_problem_types_page_is_current():
    """docs/reference/problems.md is what the command prints, in a fresh process (so no
    module this test run imported adds a type)."""
    generated = subprocess.run(
        [sys.executable, "manage.py", "problem_types", "--markdown"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    committed = (REPO / "docs" / "reference" / "problems.md").read_text()
    assert generated == committed, (
        "docs/reference/problems.md is stale: run "
        "manage.py problem_types --markdown > docs/reference/problems.md"
    )


def test_the_problem_types_page_has_a_section_for_every_type_either_server_sends():
    page = problem_types.markdown_page(problem_types.known_types("config.urls_watchdog"))
    anchors = set(re.findall(r"^## ([a-z0-9-]+)$", page, re.M))

    codes = codes_in_source(*CATALOG, "watchdog") | {code for code, _ in _DRF_CODES.values()}
    assert {code.replace("_", "-") for code in codes} <= anchors
    assert {"ping-rejected", "dataset-not-found", "not-authenticated"} <= anchors
    for code in codes:  # each section names its type URI, as the servers answer it
        assert f"`type: /problems/{code.replace('_', '-')}`" in page
