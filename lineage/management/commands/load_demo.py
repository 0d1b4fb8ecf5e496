"""Load the demo catalog with a month of its history (embedded mode only) and print its
API key.

It lives in ``lineage`` because the demo's history is told by both apps (the catalog's
services, then the lineage its jobs reported), and lineage is the app allowed to import
the catalog (the import contracts).
"""

import json
import logging
import os
import secrets
from contextlib import contextmanager
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from catalog.actors import Actor
from catalog.demo import feed, world
from catalog.errors import SubscriptionExists
from catalog.models import ApiKey, Dataset, Membership, Team
from catalog.services import subscriptions
from catalog.services import teams as team_services
from lineage import demo

DEFAULT_SEED = 17
# What the watchdog's side of the demo replays (``load_watchdog_demo``).
FEED_FILE = "demo-watchdog-feed.json"


def _write_private(path, text: str) -> None:
    """Write ``text`` to ``path``, created 0600 from the start: never readable by others,
    even briefly."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


@contextmanager
def _quiet(logger_name: str):
    """Keep a logger to warnings inside the block: the history's sweeps each log a line
    at info, which would crowd ``make run``'s start."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


class Command(BaseCommand):
    help = (
        "Load the demo catalog, with a month of history up to now, into the embedded "
        "database and print the demo API key. A second run keeps what the first loaded."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--seed",
            type=int,
            default=DEFAULT_SEED,
            help="The history's random seed (landing times, retry delays).",
        )

    def handle(self, *args, seed, **options):
        if not settings.EMBEDDED:
            raise CommandError(
                "demo data is loaded only in the embedded mode (no DATABASE_URL set), never "
                "into a configured database"
            )
        key_file = settings.VAR_DIR / "demo-api-key"
        raw_orders = world.RAW_ORDERS
        loaded = Dataset.objects.filter(namespace=raw_orders.namespace, name=raw_orders.name)
        if loaded.exists() and key_file.exists():
            self._point_demo_webhooks_here()
            self._demo_login()
            self.stdout.write(key_file.read_text().strip())
            return
        with transaction.atomic():
            if not loaded.exists():
                with _quiet("catalog.polling"):
                    history = demo.load(
                        now=timezone.now(), seed=seed, demo_hook_url=self._hook_url()
                    )
                document = feed.watchdog_feed_events(history, seed=seed)
                _write_private(settings.VAR_DIR / FEED_FILE, json.dumps(document, indent=1))
            self._point_demo_webhooks_here()
            self._demo_login()
            _, token = team_services.api_key_create(
                team=Team.objects.get(slug="orders"), name="demo", scopes=ApiKey.Scope.values
            )
            _write_private(key_file, token + "\n")
        self.stdout.write(token)

    def _hook_url(self) -> str:
        """The demo webhook receiver on this server (``/demo/hooks/<team>``), which
        verifies each signature and logs the event; ``{team}`` for the team's slug."""
        host = os.environ.get("TIDEMARK_HOST", "127.0.0.1")
        port = os.environ.get("TIDEMARK_PORT", "8000")
        return f"http://{host}:{port}/demo/hooks/{{team}}"

    def _point_demo_webhooks_here(self) -> None:
        """The demo's subscriptions notified at the demo receiver point at this server's
        (its port may differ from the last start's)."""
        for spec in world.SUBSCRIPTIONS:
            if spec.endpoint != world.DEMO_HOOK:
                continue
            actor = Actor(team=Team.objects.get(slug=spec.team), username="demo")
            declare = partial(
                subscriptions.subscription_create,
                actor=actor,
                dataset=Dataset.objects.get(
                    namespace=spec.dataset.namespace, name=spec.dataset.name
                ),
                job_namespace=spec.job_namespace,
                job_name=spec.job_name,
                endpoint_url=self._hook_url().format(team=spec.team),
            )
            try:
                declare()
            except SubscriptionExists as exists:
                # A declaration never moves a subscription: delete it, declare it again.
                subscriptions.subscription_delete(
                    actor=actor, subscription_id=exists.extra["existing"]["id"]
                )
                declare()

    def _demo_login(self) -> None:
        """A person to log in to the web pages as: ``demo``, admin of orders and member of
        analytics, who sees every team's governance reports. Its password is random per
        install, kept 0600 in ``var/demo-login`` as ``demo <password>`` (``make run``
        prints it)."""
        login_file = settings.VAR_DIR / "demo-login"
        User = get_user_model()
        if login_file.exists() and User.objects.filter(username="demo").exists():
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.filter(username="demo").first() or User(username="demo")
        user.set_password(password)
        user.save()
        user.user_permissions.add(Permission.objects.get(codename="view_datasetusage"))
        for slug, role in (
            ("orders", Membership.Role.ADMIN),
            ("analytics", Membership.Role.MEMBER),
        ):
            Membership.objects.get_or_create(
                team=Team.objects.get(slug=slug), user=user, defaults={"role": role}
            )
        _write_private(login_file, f"demo {password}\n")
