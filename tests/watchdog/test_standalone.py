"""The watchdog deployed alone (``config.settings.watchdog``): its own database, no catalog,
no lineage, no Celery. Each test runs real subprocesses with a clean environment, on a
throwaway SQLite file, and never touches the suite's databases."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.watchdog.processes import standalone_environment

pytestmark = pytest.mark.timeout(120)

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
# Packages the standalone watchdog must never load: the catalog's apps and Celery.
FORBIDDEN_ROOTS = ("catalog", "lineage", "api")
FORBIDDEN_PREFIXES = ("celery", "kombu")

# Runs inside the standalone process: ping through the watchdog's own URLconf, run one
# loop cycle, then report what was imported.
SCRIPT = r"""
import json, sys
from datetime import timedelta

import django
django.setup()

import config.urls_watchdog  # noqa: F401
from django.core.management import call_command
from django.test import Client
from django.urls import resolve
from django.utils import timezone
from io import StringIO

from watchdog import monitors, tokens
from watchdog.models import Incident, Monitor, Ping

now = timezone.now()
monitor = monitors.monitor_create(now=now, name="nightly export", period_seconds=60)
match = resolve(f"/ping/{monitor.ping_key}")
client = Client(HTTP_HOST="127.0.0.1")
rid = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"
ping = client.post(f"/ping/{monitor.ping_key}?rid={rid}", data=b"done", content_type="text/plain")
unknown = client.get("/ping/6f9619ff-8b86-d011-b42d-00cf4fc964ff")
nul = client.get(f"/ping/{monitor.ping_key}?partition=a%00b")
unrouted = client.get("/nowhere")
_, token = tokens.create("standalone")
listed = client.get("/api/v1/monitors", HTTP_AUTHORIZATION=f"Bearer {token}")
monitor.refresh_from_db()
after_ping = {"state": monitor.state, "check_at": monitor.check_at is not None}

# Make the next deadline long past, so one cycle has something to judge.
Monitor.objects.filter(pk=monitor.pk).update(
    deadline_at=now - timedelta(minutes=5), check_at=now - timedelta(minutes=5)
)
out = StringIO()
call_command("run_watchdog", "--once", stdout=out)
monitor.refresh_from_db()

loaded = sorted(sys.modules)
print("RESULT " + json.dumps({
    "view": match.func.__name__,
    "ping": [ping.status_code, ping.content.decode()],
    "unknown": unknown.status_code,
    "nul": [nul.status_code, nul["Content-Type"]],
    "unrouted": [unrouted.status_code, unrouted["Content-Type"]],
    "listed": [listed.status_code, [m["name"] for m in listed.json()]],
    "pings": Ping.objects.count(),
    "after_ping": after_ping,
    "cycle": out.getvalue(),
    "incidents": list(Incident.objects.values_list("reason", flat=True)),
    "state": monitor.state,
    "modules": loaded,
}))
"""


def _forbidden(modules) -> list[str]:
    return sorted(
        name
        for name in modules
        if name.split(".")[0] in FORBIDDEN_ROOTS or name.startswith(FORBIDDEN_PREFIXES)
    )


def _run(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def standalone_env(tmp_path) -> dict[str, str]:
    """A migrated throwaway SQLite watchdog database and the environment naming it."""
    database = tmp_path / "wd.sqlite3"
    env = standalone_environment(tmp_path, WATCHDOG_DATABASE_URL=f"sqlite:///{database}")
    assert "DATABASE_URL" not in env
    migrated = _run([MANAGE, "migrate", "--noinput", "-v", "1"], env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert "Applying watchdog.0001" in migrated.stdout
    assert database.exists()
    # Only the standalone apps were migrated into it: no catalog tables.
    assert not (tmp_path / "var" / "catalog.sqlite3").exists()
    return env


def test_standalone_watchdog_serves_pings_and_runs_without_catalog_or_celery(standalone_env):
    done = _run(["-c", SCRIPT], standalone_env)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))

    assert result["view"] == "ping"
    assert result["ping"] == [200, "OK"]
    assert result["unknown"] == 404
    # Its own middleware and error handlers: a NUL is refused, an unrouted path a problem.
    assert result["nul"] == [400, "application/problem+json"]
    assert result["unrouted"] == [404, "application/problem+json"]
    assert result["listed"] == [200, ["nightly export"]]
    assert result["pings"] == 1
    assert result["after_ping"] == {"state": "up", "check_at": True}
    assert "1 missed deadline(s)" in result["cycle"], result["cycle"]
    assert result["incidents"] == ["missed"]
    assert result["state"] == "down"

    modules = result["modules"]
    assert "watchdog.loop" in modules and "config.urls_watchdog" in modules  # it did run
    assert _forbidden(modules) == []


def test_run_watchdog_command_alone_imports_no_catalog_or_celery(standalone_env):
    """The real ``manage.py run_watchdog --once`` process, with ``-X importtime`` listing
    every module it imported."""
    done = _run(["-X", "importtime", MANAGE, "run_watchdog", "--once"], standalone_env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "0 missed deadline(s), 0 page(s) attempted" in done.stdout
    imported = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.M)
    assert "watchdog.loop" in imported and "django" in imported
    assert _forbidden(imported) == []


SAME = "postgres://postgres@127.0.0.1:5432/tidemark_same"


@pytest.mark.parametrize("settings_module", ["config.settings.watchdog", "config.settings.test"])
def test_system_check_refuses_a_watchdog_database_shared_with_the_catalog(
    tmp_path, settings_module
):
    env = standalone_environment(
        tmp_path,
        DJANGO_SETTINGS_MODULE=settings_module,
        DATABASE_URL=SAME,
        WATCHDOG_DATABASE_URL=SAME,
    )
    shared = _run([MANAGE, "check"], env)
    assert shared.returncode != 0
    assert "watchdog.E001" in shared.stdout + shared.stderr

    # The same server and credentials but another database is allowed.
    env["WATCHDOG_DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/tidemark_same_wd"
    separate = _run([MANAGE, "check"], env)
    assert separate.returncode == 0, separate.stdout + separate.stderr
    assert "watchdog.E001" not in separate.stdout + separate.stderr


# Runs inside the standalone process: an operator signs in to the on-call pages, lists its
# monitors, opens one and pauses it, with CSRF enforced, through the watchdog's own URLs.
ONCALL_SCRIPT = r"""
import json, re, sys

import django
django.setup()

from django.test import Client
from django.utils import timezone

from watchdog import monitors
from watchdog.models import Monitor

now = timezone.now()
mine = monitors.monitor_create(now=now, name="orders nightly", owner="orders", period_seconds=60)
other = monitors.monitor_create(now=now, name="billing export", owner="billing", period_seconds=60)

client = Client(HTTP_HOST="127.0.0.1", enforce_csrf_checks=True)
anonymous = client.get("/oncall/")
login_page = client.get("/oncall/login")
token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.content.decode())[1]
signed_in = client.post(
    "/oncall/login", {"username": "olga", "password": sys.argv[1], "csrfmiddlewaretoken": token}
)
listed = client.get("/oncall/")
detail = client.get(f"/oncall/monitors/{mine.pk}")
token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', detail.content.decode())[1]
no_token = client.post(f"/oncall/monitors/{mine.pk}/pause")
paused = client.post(f"/oncall/monitors/{mine.pk}/pause", {"csrfmiddlewaretoken": token})
others = client.get(f"/oncall/monitors/{other.pk}")
incidents = client.get("/oncall/incidents")

print("RESULT " + json.dumps({
    "anonymous": [anonymous.status_code, anonymous.get("Location")],
    "login_page": login_page.status_code,
    "signed_in": [signed_in.status_code, signed_in.get("Location")],
    "listed": [listed.status_code, re.findall(r'monitors/\d+">([^<]+)<', listed.content.decode())],
    "detail": detail.status_code,
    "no_token": no_token.status_code,
    "paused": paused.status_code,
    "state": Monitor.objects.get(pk=mine.pk).state,
    "others": others.status_code,
    "incidents": incidents.status_code,
    "modules": sorted(sys.modules),
}))
"""


def test_standalone_watchdog_serves_the_on_call_pages_to_its_own_operators(standalone_env):
    env = {**standalone_env, "WATCHDOG_OPERATOR_PASSWORD": "tide-watch-4417"}
    created = _run([MANAGE, "create_operator", "olga", "--label", "orders"], env)
    assert created.returncode == 0, created.stdout + created.stderr
    assert created.stdout.strip() == "operator olga (orders)"
    assert "tide-watch-4417" not in created.stdout + created.stderr

    done = _run(["-c", ONCALL_SCRIPT, "tide-watch-4417"], standalone_env)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))

    assert result["anonymous"] == [302, "/oncall/login?next=%2Foncall%2F"]
    assert result["login_page"] == 200
    assert result["signed_in"] == [302, "/oncall/"]
    assert result["listed"] == [200, ["orders nightly"]]
    assert result["detail"] == 200
    assert result["no_token"] == 403
    assert result["paused"] == 302
    assert result["state"] == "paused"
    assert result["others"] == 404
    assert result["incidents"] == 200
    assert "watchdog.oncall" in result["modules"]
    assert _forbidden(result["modules"]) == []
