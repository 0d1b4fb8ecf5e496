"""The web pages in a real browser (Playwright on chromium): log in, find a dataset,
subscribe, acknowledge a change notice, replay a dead letter; each page's screenshot is
saved (``screenshot`` fixture)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from catalog.models import (
    ChangeNoticeAcknowledgement,
    Dataset,
    Delivery,
    LatePartition,
    Membership,
    Partition,
    PartitionRevision,
    Subscription,
)
from catalog.services.teams import api_key_create
from tests.catalog.factories import DatasetFactory, EndpointFactory, TeamFactory
from tests.web.conftest import PASSWORD
from tests.web.helpers import announce, dead_letter, observe

pytestmark = pytest.mark.django_db(transaction=True)
expect = pytest.importorskip("playwright.sync_api").expect


def seed():
    """A small catalog: orders owns a daily dataset with a month of partitions, lineage
    around it and a change notice; analytics (ana's team, she is its admin and governance
    staff) reads it undeclared and has a dead letter."""
    orders = TeamFactory(slug="orders", name="Orders platform")
    analytics = TeamFactory(slug="analytics", name="Analytics engineering")
    finance = TeamFactory(slug="finance", name="Finance data")
    raw = DatasetFactory(owner=orders, namespace="s3://lake", name="raw/orders", criticality="high")
    daily = DatasetFactory(
        owner=orders,
        namespace="s3://lake",
        name="curated/orders_daily",
        description="Orders per day and market.",
        sla_cron="30 6 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=1800,
        criticality="critical",
    )
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    # Registered before its month of partitions, so every period is tracked.
    Dataset.objects.filter(pk=daily.pk).update(created_at=today - timedelta(days=40))
    for n in range(3, 12):
        table = DatasetFactory(
            owner=finance if n % 2 else orders,
            name=f"marts/table_{n:02}",
            criticality=("low", "medium", "high", "critical")[n % 4],
            sla_cron="0 6 * * *" if n % 3 else "",
            lifecycle="deprecated" if n == 10 else "active",
        )
        if n % 3 == 1:  # late since yesterday's deadline
            LatePartition.objects.create(
                dataset=table,
                partition_key=(today - timedelta(days=2)).date().isoformat(),
                deadline_at=today - timedelta(hours=18),
                late_at=today - timedelta(hours=18),
            )
        elif n % 3 == 2:  # yesterday's partition is ready
            start = today - timedelta(days=1)
            partition = Partition.objects.create(
                dataset=table, key=start.date().isoformat(), start_at=start, end_at=today
            )
            partition.current_revision = PartitionRevision.objects.create(
                partition=partition, state="ready", ready_at=today + timedelta(hours=1)
            )
            partition.save()
    for age in range(1, 31):
        if age in (4, 9):
            continue  # missing
        start = today - timedelta(days=age)
        partition = Partition.objects.create(
            dataset=daily,
            key=start.date().isoformat(),
            start_at=start,
            end_at=start + timedelta(days=1),
        )
        late = age in (6, 13)
        revision = PartitionRevision.objects.create(
            partition=partition,
            state="ready",
            ready_at=start + timedelta(days=1, hours=9 if late else 4),
            detected_by="poll" if age % 7 == 0 else "event",
            version="rerun-2" if age == 11 else "",
        )
        partition.current_revision = revision
        partition.save()
        if late:
            LatePartition.objects.create(
                dataset=daily,
                partition_key=partition.key,
                deadline_at=start + timedelta(days=1, hours=5, minutes=30),
                late_at=start + timedelta(days=1, hours=6),
                recovered_at=revision.ready_at,
            )
    observe(orders, "build_daily", raw, "read")
    observe(orders, "build_daily", daily, "write")
    observe(analytics, "rollup", daily, "read")
    observe(analytics, "rollup", ("s3://lake", "marts/rollup"), "write")
    observe(finance, "board_report", daily, "read", job_namespace="dbt-finance")
    Subscription.objects.create(team=finance, dataset=daily)
    announce(daily)
    hook = EndpointFactory(team=analytics, url="https://hooks.example.com/analytics")
    Subscription.objects.create(team=analytics, dataset=raw, endpoint=hook)
    for n in range(4):
        dead_letter(hook, state="succeeded", n=n)
    dead = dead_letter(hook)
    api_key_create(team=analytics, name="airflow", scopes=["publish", "read"])
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    ana = get_user_model().objects.create_user("ana", password=PASSWORD)
    ana.user_permissions.add(Permission.objects.get(codename="view_datasetusage"))  # governance
    Membership.objects.create(team=analytics, user=ana, role=Membership.Role.ADMIN)
    return {"daily": daily, "dead": dead, "analytics": analytics}


def log_in(page, live_server):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()


def test_log_in_and_find_a_dataset(page, live_server, screenshot):
    seed()
    log_in(page, live_server)
    expect(page.locator("table.datasets tbody tr")).to_have_count(11)
    screenshot(page, "catalog")
    page.get_by_label("Search").fill("orders_daily")  # htmx swaps the table as one types
    expect(page.locator("table.datasets tbody tr")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"q=orders_daily"))
    page.locator("table.datasets a", has_text="orders_daily").click()
    expect(page.locator("h1")).to_contain_text("curated/orders_daily")
    expect(page.locator("svg.timeline g.cell")).to_have_count(30)
    expect(page.locator("svg.timeline g.cell.missing")).to_have_count(2)
    expect(page.locator(".lineage g.node")).to_have_count(6)
    # Its usual arrival beside the timeline: 28 arrivals, 4 h after midnight but 2 at 9 h.
    profile = page.locator("#arrival-profile")
    expect(profile).to_contain_text("learned from 28 of the last 90 periods")
    expect(profile.locator("tr", has_text="all days")).to_contain_text("4 h ≈ 04:00")
    screenshot(page, "dataset")


def test_subscribe_and_acknowledge_a_change_notice(page, live_server):
    seeded = seed()
    log_in(page, live_server)
    page.goto(f"{live_server.url}/datasets/{seeded['daily'].pk}/")
    form = page.locator("form#subscribe")
    form.get_by_label("Team").select_option("analytics")
    form.get_by_label("Job namespace").fill("airflow://analytics")
    form.get_by_label("Job name", exact=True).fill("rollup")
    form.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_role("status")).to_contain_text("Team analytics subscribed to")
    assert Subscription.objects.filter(team=seeded["analytics"], job_name="rollup").exists()
    page.get_by_role("button", name="Acknowledge for analytics").click()
    expect(page.get_by_role("status")).to_contain_text("Team analytics acknowledged")
    expect(page.locator(".notice")).to_contain_text("analytics ✓")
    assert ChangeNoticeAcknowledgement.objects.filter(team=seeded["analytics"]).exists()


def test_replay_a_dead_letter_and_see_the_team_and_governance_pages(page, live_server, screenshot):
    seeded = seed()
    log_in(page, live_server)
    page.get_by_role("navigation").get_by_role("link", name="analytics").click()
    expect(page.get_by_role("heading", name=re.compile("Analytics engineering"))).to_be_visible()
    row = page.locator(f"#delivery-{seeded['dead'].pk}")
    expect(row).to_be_visible()
    expect(page.locator("#deliveries")).to_contain_text("80.0 %")
    screenshot(page, "team")
    row.get_by_role("button", name="Replay").click()
    expect(page.get_by_role("status")).to_contain_text("will be sent again")
    expect(page.locator(f"#delivery-{seeded['dead'].pk}")).to_have_count(0)
    seeded["dead"].refresh_from_db()
    assert seeded["dead"].state == Delivery.State.PENDING
    page.get_by_role("link", name="Governance").click()
    expect(page.locator("#uncatalogued")).to_contain_text("marts/rollup")
    expect(page.locator("#undeclared-reads")).to_contain_text("airflow://analytics/rollup")
    expect(page.locator("#critical-without-monitor")).to_contain_text("curated/orders_daily")
    screenshot(page, "governance")


# --- a phone's width ---------------------------------------------------------------------------

LONG_NAMESPACE = "s3://acme-data-lake-production-eu-west-1"
LONG_NAME = (
    "warehouse/landing/vendor_feeds/partner_orders_eu_west/"
    "curated_orders_daily_snapshot_with_refunds_and_chargebacks_v2"
)


def seed_long_names(seeded):
    """A dataset with a very long identity that reads into orders_daily, so the catalog, the
    dataset page's heading and the lineage picture all meet it."""
    orders = seeded["daily"].owner
    long = DatasetFactory(
        owner=orders,
        namespace=LONG_NAMESPACE,
        name=LONG_NAME,
        description="Partner orders, one row per order and refund, as the vendor sends them.",
    )
    observe(orders, "build_daily", long, "read")
    return long


def test_every_catalog_page_fits_a_phone(page, live_server, screenshot):
    from tests.phone import PHONE, assert_fits, assert_on_screen

    seeded = seed()
    long = seed_long_names(seeded)
    bob = get_user_model().objects.create_user("bob", password=PASSWORD)  # not governance
    Membership.objects.create(team=seeded["analytics"], user=bob)
    page.set_viewport_size(PHONE)

    page.goto(f"{live_server.url}/")
    expect(page.get_by_role("heading", name="Sign in to Tidemark")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.get_by_role("button", name="Sign in"))
    screenshot(page, "signin-phone")
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.locator("table.datasets a", has_text="curated_orders_daily_snapshot"))
    assert_on_screen(page.get_by_role("link", name="Governance"))
    assert_on_screen(page.get_by_role("button", name="Sign out"))
    screenshot(page, "catalog-phone")

    page.goto(f"{live_server.url}/datasets/{seeded['daily'].pk}/")
    expect(page.locator("h1")).to_contain_text("curated/orders_daily")
    assert_fits(page)
    assert_on_screen(page.locator("h1"))
    # The whole month of partitions, smaller, and its newest key.
    assert_on_screen(page.locator("svg.timeline g.cell").last)
    assert_on_screen(page.locator(".timeline-axis span").last)
    assert_on_screen(page.get_by_role("button", name="Subscribe"))
    assert_on_screen(page.locator("#arrival-profile tr", has_text="all days"))
    screenshot(page, "dataset-phone")

    page.goto(f"{live_server.url}/datasets/{long.pk}/")
    expect(page.locator("h1")).to_contain_text("with_refunds_and_chargebacks_v2")
    assert_fits(page)
    assert_on_screen(page.locator("h1"))

    page.get_by_role("navigation").get_by_role("link", name="analytics").click()
    expect(page.get_by_role("heading", name=re.compile("Analytics engineering"))).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.locator(f"#delivery-{seeded['dead'].pk}").get_by_role("button"))
    screenshot(page, "team-phone")

    page.get_by_role("link", name="Governance").click()
    expect(page.locator("#uncatalogued")).to_contain_text("marts/rollup")
    assert_fits(page)
    assert_on_screen(page.locator("#undeclared-reads td").first)
    screenshot(page, "governance-phone")

    page.goto(f"{live_server.url}/datasets/987654/")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    assert_fits(page)
    screenshot(page, "not-found-phone")

    # The pages answered when something failed, rendered by the server as it answers them.
    from django.template.loader import render_to_string

    def answer(body: str, status: int):
        return lambda route: route.fulfill(
            status=status, body=body, content_type="text/html; charset=utf-8"
        )

    for name, status, heading in (
        ("500.html", 500, "Something went wrong"),
        ("httpkit/unavailable.html", 503, "Temporarily unavailable"),
    ):
        page.route(f"{live_server.url}/failing", answer(render_to_string(name), status))
        page.goto(f"{live_server.url}/failing")
        expect(page.get_by_role("heading", name=heading)).to_be_visible()
        assert_fits(page)
        assert page.evaluate("getComputedStyle(document.querySelector('header.top')).display") == (
            "flex"  # the shared stylesheet loaded
        )
        page.unroute(f"{live_server.url}/failing")

    page.goto(f"{live_server.url}/")
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/governance/?team=orders")  # not bob's team
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    assert_fits(page)
    assert_on_screen(page.get_by_role("link", name="Back to the catalog"))


def test_long_dataset_names_are_never_clipped_in_the_lineage_picture(page, live_server, screenshot):
    """Each name in the picture fits its box, as the browser measures the text, and the
    long one is there in full as the box's tooltip (its SVG title)."""
    seeded = seed()
    seed_long_names(seeded)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/datasets/{seeded['daily'].pk}/")
    expect(page.locator(".lineage g.node")).to_have_count(7)
    page.locator(".lineage-list summary").click()  # the same, as a list
    expect(page.locator(".lineage-list")).to_contain_text(f"dataset {LONG_NAMESPACE}/{LONG_NAME}")
    screenshot(page, "dataset-long-names")
    boxes = page.evaluate(
        """() => [...document.querySelectorAll('.lineage g.node')].map((node) => {
          const rect = node.querySelector('rect');
          const x = rect.x.baseVal.value, width = rect.width.baseVal.value;
          return {
            title: node.querySelector('title').textContent,
            lines: [...node.querySelectorAll('text')].map((text) => ({
              text: text.textContent,
              left: text.getBBox().x - x,
              right: x + width - (text.getBBox().x + text.getComputedTextLength()),
            })),
          };
        })"""
    )
    for box in boxes:
        for line in box["lines"]:
            assert line["left"] >= 0 and line["right"] >= 0, (box["title"], line)
    (long,) = [b for b in boxes if LONG_NAME in b["title"]]
    assert long["title"] == f"dataset {LONG_NAMESPACE}/{LONG_NAME}"
    label = [line["text"] for line in long["lines"]][:-1]  # the last line is the namespace
    assert len(label) == 2 and label[0].startswith("…")
    assert LONG_NAME.endswith("".join(label)[1:])
