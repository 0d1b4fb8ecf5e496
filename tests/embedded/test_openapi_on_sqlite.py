"""The OpenAPI documents served in the embedded mode (SQLite) are the committed ones
(generated on PostgreSQL): nothing in them depends on the database, such as a model
column's integer range (SQLite's is 64-bit, PostgreSQL's 32-bit)."""

from __future__ import annotations

import pytest
import yaml
from django.test import Client
from django.test.utils import override_settings

from tests.embedded.helpers import REPO_ROOT

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])


@pytest.mark.parametrize(
    ("urlconf", "committed"),
    [("config.urls", "openapi.yaml"), ("config.urls_watchdog", "openapi-watchdog.yaml")],
)
def test_the_served_document_is_the_committed_one(urlconf, committed):
    with override_settings(ROOT_URLCONF=urlconf):
        response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert response.status_code == 200
    served = yaml.safe_load(response.content)
    assert served == yaml.safe_load((REPO_ROOT / "docs" / committed).read_text())
