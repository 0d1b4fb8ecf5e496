"""The embedded demo's web login: ``load_demo`` creates a ``demo`` person in the demo teams,
its random password kept 0600 in ``var/demo-login`` for ``make run`` to print."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from catalog.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def embedded(settings, tmp_path, monkeypatch):
    settings.EMBEDDED = True
    settings.VAR_DIR = tmp_path
    settings.TIDEMARK_STORAGE_SOURCES = {"local": {"url": f"file://{tmp_path}/lake"}}
    monkeypatch.setattr("catalog.watchdog_feed.configured", lambda: False)
    return tmp_path


def test_load_demo_creates_a_demo_login(embedded, client):
    call_command("load_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    login = embedded / "demo-login"
    assert oct(login.stat().st_mode & 0o777) == "0o600"
    username, password = login.read_text().split()
    assert username == "demo"
    response = client.post(
        "/accounts/login/", {"username": "demo", "password": password}, follow=True
    )
    assert response.status_code == 200 and "<h1>Catalog</h1>" in response.content.decode()
    roles = dict(Membership.objects.filter(user__username="demo").values_list("team__slug", "role"))
    assert roles == {"orders": "admin", "analytics": "member"}
    assert response.context["user"].has_perm("catalog.view_datasetusage")
    call_command("load_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert login.read_text().split() == [username, password]  # kept on restart
