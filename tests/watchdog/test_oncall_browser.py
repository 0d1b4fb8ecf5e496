"""The on-call pages in a real browser (Debian's chromium through pytest-playwright) against a
live server: an operator signs in, finds the monitor that is down, pauses it and resumes it.
Leaves screenshots of the monitors and monitor pages (``screenshot`` fixture)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.watchdog.conftest import OPERATOR_PASSWORD
from watchdog import incidents, monitors
from watchdog.models import Incident, Monitor, Ping, Run

pytestmark = [
    pytest.mark.django_db(transaction=True, databases="__all__"),
    pytest.mark.timeout(120),
]


def _more_monitors(world) -> None:
    """A few more monitors and pings, so the pages look like a working day."""
    now = timezone.now()
    nightly = world["nightly"]
    for minutes, kind, run_id in ((95, "start", "run-0412"), (40, "fail", "run-0412")):
        Ping.objects.create(
            monitor=nightly,
            kind=kind,
            run_id=run_id,
            exit_status=1 if kind == "fail" else None,
            duration_ms=55 * 60 * 1000 if kind == "fail" else None,
            partition=world["incident"].partition if kind == "fail" else "",
            received_at=now - timedelta(minutes=minutes),
            method="POST",
            remote_addr="10.20.0.14",
        )
    Run.objects.create(
        monitor=nightly,
        run_id="run-0412",
        started_at=now - timedelta(minutes=95),
        finished_at=now - timedelta(minutes=40),
        outcome="fail",
    )
    Monitor.objects.filter(pk=nightly.pk).update(
        last_ping_at=now - timedelta(minutes=40), last_ping_kind="fail"
    )
    for minutes in (65, 5):
        Ping.objects.create(
            monitor=world["hourly"],
            kind="success",
            received_at=now - timedelta(minutes=minutes),
            method="GET",
            remote_addr="10.20.0.9",
        )
    rollup = monitors.monitor_create(
        now=now, name="orders weekly rollup", owner="orders", period_seconds=7 * 86400
    )
    monitors.monitor_pause(rollup, now=now)
    Monitor.objects.filter(pk=world["billing"].pk).update(
        last_ping_at=now - timedelta(minutes=11),
        last_ping_kind="success",
        deadline_at=now - timedelta(minutes=1),
        check_at=now + timedelta(minutes=4),
    )
    payments = monitors.monitor_create(
        now=now, name="billing payments ledger", owner="billing", period_seconds=900
    )
    failed = incidents.open_incident(
        payments,
        reason=Incident.Reason.FAILED,
        deadline_at=now - timedelta(days=1),
        summary="billing payments ledger reported failure",
        now=now - timedelta(days=1),
    )
    incidents.resolve([failed], now=now - timedelta(hours=23))
    Monitor.objects.filter(pk=payments.pk).update(
        state=Monitor.State.UP,
        last_ping_at=now - timedelta(minutes=3),
        last_ping_kind="success",
        deadline_at=now + timedelta(minutes=12),
        check_at=now + timedelta(minutes=12),
    )


def test_an_operator_pauses_and_resumes_a_down_monitor_in_the_browser(
    live_server, page, screenshot, oncall_world, make_operator
):
    from playwright.sync_api import expect

    make_operator("olga", labels=["orders", "billing"])
    make_operator("bruno", labels=["billing"])
    _more_monitors(oncall_world)
    nightly = oncall_world["nightly"]

    page.goto(f"{live_server.url}/oncall/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Username").fill("olga")
    page.get_by_label("Password").fill(OPERATOR_PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("heading", name="Monitors")).to_be_visible()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(5)
    expect(rows.first).to_contain_text("orders nightly")  # down first
    expect(rows.first.locator(".state")).to_have_text("down")
    expect(page.locator("tr", has_text="billing export").locator(".state")).to_have_text("grace")
    started = time.perf_counter()
    page.goto(f"{live_server.url}/oncall/")
    print(f"monitors page: {(time.perf_counter() - started) * 1000:.0f} ms in the browser")
    screenshot(page, "oncall-monitors")

    page.get_by_role("link", name="orders nightly").click()
    expect(page.get_by_role("heading", name="orders nightly")).to_be_visible()
    expect(page.get_by_text("(1 open)")).to_be_visible()
    expect(page.locator(".pages")).to_contain_text("trigger to orders on-call: sent")
    screenshot(page, "oncall-monitor")

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("h1 .state")).to_have_text("paused")
    expect(page.get_by_text("(0 open)")).to_be_visible()
    expect(page.locator(".actions")).to_contain_text("Paused by olga")
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    assert Monitor.objects.get(pk=nightly.pk).state == Monitor.State.PAUSED
    assert not Incident.objects.filter(monitor=nightly, resolved_at__isnull=True).exists()

    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("button", name="Pause")).to_be_visible()
    expect(page.locator("h1 .state")).to_have_text("new")
    resumed = Monitor.objects.get(pk=nightly.pk)
    assert resumed.state == Monitor.State.NEW and resumed.deadline_at is not None

    page.get_by_role("link", name="Incidents").click()
    expect(page.get_by_role("heading", name="Incidents")).to_be_visible()
    screenshot(page, "oncall-incidents")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto(f"{live_server.url}/oncall/monitors/{nightly.pk}")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()

    # Another team's operator cannot even see it.
    page.get_by_label("Username").fill("bruno")
    page.get_by_label("Password").fill(OPERATOR_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()


@pytest.fixture
def standalone_watchdog(tmp_path):
    """The watchdog's web server deployed alone (gunicorn, ``config.settings.watchdog``: no
    catalog app, no static files app) on the suite's test watchdog database."""
    from tests.catalog.stack_helpers import watchdog_environment
    from tests.catalog.worker_helpers import free_port
    from tests.watchdog.processes import WatchdogServer

    server = WatchdogServer(
        name="watchdog-web",
        log_path=tmp_path / "web.log",
        env=watchdog_environment(TIDEMARK_VAR_DIR=str(tmp_path / "var")),
        port=free_port(),
    )
    server.start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def test_every_on_call_page_fits_a_phone_on_the_watchdog_deployed_alone(
    standalone_watchdog, page, screenshot, oncall_world, make_operator, settings
):
    """Sign-in, monitors, a monitor, incidents, the problem types and the not-found page
    at 390 px wide, served by the standalone watchdog with the catalog's look (its
    stylesheet and favicon come from the watchdog itself)."""
    from playwright.sync_api import expect

    from tests.phone import PHONE, assert_fits, assert_on_screen

    # Hashed as the server checks it: the suite's quick test hasher is not one of its own.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    make_operator("olga", labels=["orders", "billing"])
    _more_monitors(oncall_world)
    nightly, url = oncall_world["nightly"], standalone_watchdog.url
    page.set_viewport_size(PHONE)
    failed = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)

    page.goto(f"{url}/oncall/")
    expect(page.get_by_role("heading", name="Sign in to on call")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.get_by_role("button", name="Sign in"))
    # The shared look: the same stylesheet as the catalog's, applied.
    assert page.evaluate("getComputedStyle(document.querySelector('header.top')).display") == (
        "flex"
    )
    screenshot(page, "oncall-signin-phone")
    page.get_by_label("Username").fill("olga")
    page.get_by_label("Password").fill(OPERATOR_PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("heading", name="Monitors")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.get_by_role("link", name="orders nightly"))
    assert_on_screen(page.locator("tr", has_text="orders nightly").locator(".state"))
    assert_on_screen(page.get_by_role("button", name="Sign out"))
    screenshot(page, "oncall-monitors-phone")

    page.get_by_role("link", name="orders nightly").click()
    expect(page.get_by_role("heading", name="orders nightly")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.get_by_role("button", name="Pause"))
    assert_on_screen(page.locator(".pages").first)
    screenshot(page, "oncall-monitor-phone")

    page.get_by_role("link", name="Incidents").click()
    expect(page.get_by_role("heading", name="Incidents")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.get_by_role("link", name="orders nightly").first)
    screenshot(page, "oncall-incidents-phone")

    page.goto(f"{url}/problems/")  # what a problem document's type points at
    expect(page.get_by_role("heading", name="Problem types")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.get_by_role("link", name="not-found"))

    page.goto(f"{url}/oncall/monitors/{nightly.pk + 1000}")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    assert_fits(page)
    assert failed == [f"{url}/oncall/monitors/{nightly.pk + 1000}"]  # assets and icon found
