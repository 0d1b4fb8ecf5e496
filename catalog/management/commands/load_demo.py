"""Load the small demo catalog (embedded mode only) and print its API key."""

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from catalog.actors import Actor
from catalog.models import ApiKey, Dataset, Membership, Team
from catalog.services import datasets, subscriptions
from catalog.services import teams as team_services

DEMO_TEAMS = [
    ("orders", "Orders platform", "orders-oncall@example.com"),
    ("analytics", "Analytics engineering", "analytics@example.com"),
    ("finance", "Finance data", "finance-data@example.com"),
]
DEMO_DATASETS = [
    dict(
        team="orders",
        namespace="s3://tidemark-demo",
        name="raw/orders",
        description="Raw order events, one folder per day.",
        partitioning="daily",
        completion_signal="event",
        sla_cron="30 6 * * *",
        sla_timezone="Europe/Berlin",
        sla_grace_seconds=1800,
        criticality="high",
    ),
    dict(
        team="orders",
        namespace="s3://tidemark-demo",
        name="raw/payments",
        description="Payment provider exports, hourly, with a manifest.",
        partitioning="hourly",
        completion_signal="manifest",
        storage_source="local",
        location_template="raw/payments/hour={partition}/",
        sla_cron="15 * * * *",
        criticality="medium",
    ),
    dict(
        team="finance",
        namespace="postgres://warehouse.internal:5432",
        name="finance.public.daily_revenue",
        description="Revenue per day and market; feeds the board report.",
        partitioning="daily",
        sla_cron="0 8 * * 1-5",
        sla_timezone="America/New_York",
        criticality="critical",
    ),
]


class Command(BaseCommand):
    help = "Load the demo catalog into the embedded database and print the demo API key."

    def handle(self, *args, **options):
        if not settings.EMBEDDED:
            raise CommandError(
                "demo data is loaded only in the embedded mode (no DATABASE_URL set), never "
                "into a configured database"
            )
        key_file = settings.VAR_DIR / "demo-api-key"
        if Team.objects.filter(slug="orders").exists() and key_file.exists():
            self._point_demo_webhook_here()
            self._demo_login()
            self.stdout.write(key_file.read_text().strip())
            return
        with transaction.atomic():
            teams = {}
            for slug, name, email in DEMO_TEAMS:
                teams[slug] = Team.objects.filter(slug=slug).first() or team_services.team_create(
                    slug=slug, name=name, contact_email=email
                )
            for spec in DEMO_DATASETS:
                spec = dict(spec)
                team = teams[spec.pop("team")]
                if not Dataset.objects.filter(
                    namespace=spec["namespace"], name=spec["name"]
                ).exists():
                    datasets.dataset_register(actor=Actor(team=team, username="demo"), **spec)
            self._point_demo_webhook_here()
            self._demo_login()
            _, token = team_services.api_key_create(
                team=teams["orders"], name="demo", scopes=ApiKey.Scope.values
            )
            # Created 0600 from the start: never readable by others, even briefly.
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(token + "\n")
        self.stdout.write(token)

    def _point_demo_webhook_here(self) -> None:
        """The analytics team reads raw/orders, notified at this server's demo receiver
        (``/demo/hooks/analytics``), which verifies each signature and logs the event."""
        host = os.environ.get("TIDEMARK_HOST", "127.0.0.1")
        port = os.environ.get("TIDEMARK_PORT", "8000")
        subscriptions.subscription_create(
            actor=Actor(team=Team.objects.get(slug="analytics"), username="demo"),
            dataset=Dataset.objects.get(namespace="s3://tidemark-demo", name="raw/orders"),
            job_namespace="analytics",
            job_name="daily_orders_rollup",
            endpoint_url=f"http://{host}:{port}/demo/hooks/analytics",
        )

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
        fd = os.open(login_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"demo {password}\n")
