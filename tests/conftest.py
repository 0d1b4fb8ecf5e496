"""Shared fixtures. The main suite runs on real PostgreSQL and Redis; ``tests/embedded``
runs on SQLite and the filesystem broker (``--ds=config.settings.test_embedded``).

Object storage for the catalog's poll and the watchdog's storage check: moto's S3 server
runs in this process (``ThreadedMotoServer``) on a spare port, once per session (its start
costs about a second); ``s3_bucket`` resets it for each test that asks. moto is imported
only when a test asks for S3, so the rest of the suite never pays for it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from tests.storage_helpers import reset_moto, s3_store

_EMBEDDED = os.environ.get("DJANGO_SETTINGS_MODULE", "").endswith("test_embedded")
collect_ignore_glob = [] if _EMBEDDED else ["embedded/*"]


@pytest.fixture(autouse=True)
def _forget_kept_publish_targets() -> Iterator[None]:
    """Each test starts with no publish target kept by the process (a test's rolled-back
    datasets would otherwise stay kept, and change the next test's statement counts)."""
    from catalog.services import publish_targets

    publish_targets._publish_targets.clear()
    yield


# How many notification payloads the suite checked against the event catalog, by type.
_PAYLOADS_CHECKED: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _notification_payloads_match_the_event_catalog(request, monkeypatch) -> Iterator[None]:
    """Every notification payload a test makes Tidemark build validates against its
    type's schema in the event catalog (``tests.event_payload_checks``): as built by
    ``notices.notification_payload`` (which every payload goes through), and as stored
    once the test is over (the one-statement publish sets ``backfill`` in SQL). A
    mismatch fails the test that produced it."""
    from catalog import notices
    from tests.event_payload_checks import payload_problems

    # The test's own database fixture is set up first, so it is still there at teardown.
    for name in ("transactional_db", "db"):
        if name in request.fixturenames:
            request.getfixturevalue(name)
            break
    built: dict[str, str] = {}
    problems: list[str] = []
    original = notices.notification_payload

    def checked(notification_id, *, type, data, now):
        payload = original(notification_id, type=type, data=data, now=now)
        if not _written_by_a_test():
            built[payload["id"]] = type
            problems.extend(payload_problems(type, payload))
        return payload

    monkeypatch.setattr(notices, "notification_payload", checked)
    yield
    if built and not problems and _database_in_use(request):
        from django.db import DatabaseError

        from catalog.models import Notification

        stored = Notification.objects.filter(pk__in=list(built)).values_list("type", "payload")
        try:
            stored = list(stored)
        except DatabaseError:
            stored = []  # a test that leaves its connection broken: the built ones were checked
        for type, payload in stored:
            problems.extend(payload_problems(type, payload))
            _PAYLOADS_CHECKED[type] += 1
    if problems:
        pytest.fail("payloads that do not match the event catalog:\n" + "\n".join(problems[:20]))


def _written_by_a_test() -> bool:
    """Whether the payload being built is a test's own (a test that calls
    ``notices.notification_write`` with made-up data to seed a backlog, say), not one
    Tidemark's code made: the first caller outside ``catalog.notices`` is a test module."""
    frame = sys._getframe(2)  # the caller of notices.notification_payload
    while frame is not None and frame.f_globals.get("__name__") == "catalog.notices":
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__", "").startswith("tests.")


def _database_in_use(request) -> bool:
    return request.node.get_closest_marker("django_db") is not None or any(
        name in request.fixturenames for name in ("db", "transactional_db")
    )


def pytest_terminal_summary(terminalreporter) -> None:
    if _PAYLOADS_CHECKED:
        counts = ", ".join(f"{t} {n}" for t, n in sorted(_PAYLOADS_CHECKED.items()))
        terminalreporter.write_line(
            f"notification payloads checked against their schemas: {counts}"
        )


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def team(db):
    from tests.catalog.factories import TeamFactory

    return TeamFactory(slug="orders")


@pytest.fixture
def make_key(db):
    """``make_key(team, scopes=...) -> token``: a real API key for ``team``."""
    from catalog.models import ApiKey
    from catalog.services.teams import api_key_create

    def make(team, scopes=None, **kwargs) -> str:
        _, token = api_key_create(
            team=team,
            name=kwargs.pop("name", "test"),
            scopes=scopes or ApiKey.Scope.values,
            **kwargs,
        )
        return token

    return make


@pytest.fixture
def client_for(make_key):
    """``client_for(team, scopes=...) -> APIClient`` authenticated with a fresh key."""

    def make(team, scopes=None, **kwargs) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(team, scopes, **kwargs)}")
        return client

    return make


# --- object storage ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The endpoint URL of an in-process moto server on 127.0.0.1 (session-wide)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.get_host_and_port()[1]}"
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(moto_endpoint):
    """``s3_bucket(bucket, root) -> S3Store``, on a moto server reset for this test."""
    reset_moto(moto_endpoint)
    return lambda bucket, root: s3_store(moto_endpoint, bucket, root)


# --- browser ----------------------------------------------------------------------------

CHROMIUM = os.environ.get("TIDEMARK_CHROMIUM", "/usr/bin/chromium")
SCREENSHOT_DIR = os.environ.get("TIDEMARK_SCREENSHOT_DIR")  # default: the run's tmp dir
_CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments, pointed at Debian's chromium (never a
    downloaded browser). Browser tests skip, naming the binary, where it is missing."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"chromium not found at {CHROMIUM}: apt-get install -y chromium")
    # Playwright's sync API keeps an event loop on the test's thread, which Django's
    # async-safety check mistakes for async code; the test's ORM calls are synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "headless": True,
        "args": _CHROMIUM_ARGS,
    }


@pytest.fixture
def screenshot(request, tmp_path_factory):
    """``screenshot(page, name)``: saves a full-page PNG as ``<name>.png``, the artifact the
    browser tests leave, in this run's temporary directory (tests never write into the
    working tree), except the docs' pictures: a test marked ``docs_screenshots`` (taken
    of the demo's state, ``tests/web/test_demo_screenshots.py``) saves them in
    ``TIDEMARK_SCREENSHOT_DIR`` when it is set (``docs/screenshots`` regenerates the
    README's)."""
    from pathlib import Path

    docs = SCREENSHOT_DIR and request.node.get_closest_marker("docs_screenshots")
    folder = Path(SCREENSHOT_DIR) if docs else tmp_path_factory.getbasetemp() / "screenshots"

    def take(page, name: str) -> Path:
        path = folder / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
