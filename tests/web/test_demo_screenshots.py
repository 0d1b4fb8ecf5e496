"""The docs' screenshots, taken in a real browser of exactly what ``make run`` loads: the
demo catalog's month of history (``load_demo``) and the watchdog's side of it
(``load_watchdog_demo``), signed in with the logins they print. With
``TIDEMARK_SCREENSHOT_DIR=docs/screenshots`` they regenerate the README's pictures:

    TIDEMARK_SCREENSHOT_DIR=docs/screenshots .venv/bin/python -m pytest \\
        tests/web/test_demo_screenshots.py

Each page is checked for what the picture is meant to show before it is taken.
"""

from __future__ import annotations

import re

import pytest
import time_machine
from django.utils import timezone

from catalog.demo import world
from catalog.models import Dataset, Delivery
from tests.demo_seed import embedded_demo_settings, load_like_make_run
from tests.phone import PHONE, assert_fits

DESKTOP = {"width": 1280, "height": 800}

pytestmark = [
    pytest.mark.django_db(transaction=True, databases="__all__"),
    pytest.mark.docs_screenshots,
    pytest.mark.timeout(240),
]
expect = pytest.importorskip("playwright.sync_api").expect


@pytest.fixture
def demo(settings, tmp_path, monkeypatch):
    embedded_demo_settings(settings, tmp_path / "var")
    return load_like_make_run(monkeypatch)


@pytest.fixture
def demo_at_half_past(settings, tmp_path, monkeypatch):
    """The demo loaded, and looked at, at half past the current hour (the clock running
    on): the teams' own hourly job pings a few minutes past each hour, so just before that
    its monitor is rightly in its grace period, which is not the picture's state."""
    destination = timezone.now().replace(minute=30, second=0, microsecond=0)
    with time_machine.travel(destination, tick=True):
        embedded_demo_settings(settings, tmp_path / "var")
        yield load_like_make_run(monkeypatch)


def _at_phone_width(page, screenshot, name: str) -> None:
    """The same page at a phone's width (it fits), then back to the desktop's."""
    page.set_viewport_size(PHONE)
    assert_fits(page)
    screenshot(page, name)
    page.set_viewport_size(DESKTOP)


def _dataset_id(spec: world.DatasetSpec) -> int:
    return Dataset.objects.get(namespace=spec.namespace, name=spec.name).pk


def test_the_catalog_pages_of_the_demo(page, live_server, screenshot, demo):
    username, password = demo["login"]
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()
    rows = page.locator("table.datasets tbody tr")
    expect(rows).to_have_count(len(world.DATASETS))
    for spec, state in ((world.DAILY_REVENUE, "late"), (world.RAW_ORDERS, "fresh")):
        row = rows.filter(has=page.locator(f'a[href="/datasets/{_dataset_id(spec)}/"]'))
        expect(row.locator(".badge")).to_contain_text(state)
    screenshot(page, "catalog")
    _at_phone_width(page, screenshot, "catalog-phone")

    page.goto(f"{live_server.url}/datasets/{_dataset_id(world.RAW_ORDERS)}/")
    expect(page.locator("h1")).to_contain_text("raw/orders")
    expect(page.locator("svg.timeline g.cell")).to_have_count(30)
    expect(page.locator("svg.timeline g.cell.late")).to_have_count(2)
    expect(page.locator(".lineage g.node").first).to_be_visible()
    screenshot(page, "dataset")
    _at_phone_width(page, screenshot, "dataset-phone")

    page.goto(f"{live_server.url}/teams/analytics/")
    dead = Delivery.objects.filter(endpoint__url=world.FAILING_WEBHOOK, state="dead").first()
    expect(page.locator(f"#delivery-{dead.pk}")).to_be_visible()
    expect(page.locator("#deliveries")).to_contain_text(world.FAILING_WEBHOOK)
    screenshot(page, "team")

    page.get_by_role("link", name="Governance").click()
    expect(page.locator("#undeclared-reads")).to_contain_text("raw/shipments")
    expect(page.locator("#uncatalogued")).to_contain_text("scratch/shipping_delays")
    expect(page.locator("#critical-without-monitor")).not_to_contain_text("daily_revenue")
    screenshot(page, "governance")


def test_the_on_call_pages_of_the_demo(page, live_server, screenshot, demo_at_half_past):
    username, password = demo_at_half_past["oncall"]
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/oncall/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Monitors")).to_be_visible()
    rows = page.locator("tbody tr")
    # The critical dataset's two monitors (down first), and the teams' own two.
    expect(rows).to_have_count(4)
    expect(rows.locator(".state")).to_have_text(["down", "down", "up", "up"])
    screenshot(page, "oncall-monitors")
    _at_phone_width(page, screenshot, "oncall-monitors-phone")

    page.get_by_role("link", name=re.compile(r"daily_revenue data$")).click()
    expect(page.get_by_text("(1 open)")).to_be_visible()
    expect(page.locator(".pages").first).to_contain_text("trigger to finance on-call: sent")
    # The open incident pages through the pipeline's reported failure, and says so.
    expect(page.locator("td[data-label=Pages]").first).to_contain_text(
        "paged through the incident of postgres://warehouse.internal:5432/"
        "finance.public.daily_revenue pipeline"
    )
    screenshot(page, "oncall-monitor")
