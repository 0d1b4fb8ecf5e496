"""Load the watchdog's side of the embedded demo: its on-call operator and the month the
catalog's demo history shows (run with the watchdog's settings, after ``load_demo``)."""

import json
import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from watchdog import demo

FEED_FILE = "demo-watchdog-feed.json"
LOGIN_FILE = "demo-oncall-login"


class Command(BaseCommand):
    help = (
        "Create the demo's on-call operator (its password kept 0600 in var/demo-oncall-login) "
        "and replay the catalog's demo feed (var/demo-watchdog-feed.json) into the embedded "
        "watchdog database. A second run keeps what the first loaded."
    )

    def handle(self, *args, **options):
        if not settings.EMBEDDED or os.environ.get("WATCHDOG_DATABASE_URL"):
            raise CommandError(
                "demo data is loaded only in the embedded mode (no DATABASE_URL or "
                "WATCHDOG_DATABASE_URL set), never into a configured database"
            )
        login_file = settings.VAR_DIR / LOGIN_FILE
        password = demo.new_password()
        operator, created = demo.operator_ensure(password=password)
        if created or not login_file.exists():
            if not created:  # the file was lost: a new password, kept this time
                demo.operator_password_set(operator, password=password)
            fd = os.open(login_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(f"{operator.username} {password}\n")
        feed_file = settings.VAR_DIR / FEED_FILE
        if not feed_file.exists():
            self.stdout.write(f"operator {operator.username}; no demo feed to replay")
            return
        try:
            replayed = demo.replay(json.loads(feed_file.read_text()))
        except ValueError as exc:
            raise CommandError(f"{feed_file}: {exc}") from exc
        self.stdout.write(
            f"operator {operator.username}; replayed {replayed.events} events, "
            f"{replayed.judgements} judgements, {replayed.pages} pages"
        )
