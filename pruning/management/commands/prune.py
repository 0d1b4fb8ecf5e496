"""Delete what the retention rules allow, table by table (``--dry-run``: only count)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.utils import timezone

from pruning import engine


class Command(BaseCommand):
    help = (
        "Delete rows the retention rules allow (docs/operations.md, Retention), in short "
        "batches; safe to run beside the periodic pruning and to stop at any time."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be deleted; delete nothing."
        )
        parser.add_argument(
            "--only", action="append", default=[], metavar="TABLE", help="Prune only TABLE."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="Rows per batch (default TIDEMARK_PRUNE_BATCH / WATCHDOG_PRUNE_BATCH).",
        )
        pace = parser.add_mutually_exclusive_group()
        pace.add_argument(
            "--duty-cycle",
            type=float,
            default=None,
            metavar="FRACTION",
            help=(
                "Work at most this fraction of the time, resting between batches "
                "(default TIDEMARK_PRUNE_DUTY_CYCLE / WATCHDOG_PRUNE_DUTY_CYCLE)."
            ),
        )
        pace.add_argument(
            "--no-pause",
            action="store_true",
            help="Run the batches back to back (a maintenance window: nothing else to yield to).",
        )

    def handle(
        self,
        *args,
        dry_run=False,
        only=(),
        batch_size=None,
        duty_cycle=None,
        no_pause=False,
        **options,
    ):
        try:
            selected = engine.rules(only)
        except LookupError as exc:
            names = ", ".join(rule.table for rule in engine.rules())
            raise CommandError(f"{exc} (tables: {names})") from exc
        # The options are checked before anything runs, a dry run included.
        size = settings.TIDEMARK_PRUNE["batch_size"] if batch_size is None else batch_size
        if size < 1:
            raise CommandError(f"--batch-size must be at least 1, not {size}")
        if no_pause:
            duty_cycle = 1.0
        elif duty_cycle is None:
            duty_cycle = settings.TIDEMARK_PRUNE["duty_cycle"]
        try:
            engine.pause_after(0.0, duty_cycle)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        unmigrated = sorted(
            {r.model._meta.db_table for r in selected}
            - {
                table
                for alias in {r.alias() for r in selected}
                for table in connections[alias].introspection.table_names()
            }
        )
        if unmigrated:
            raise CommandError(
                f"the database has no table {', '.join(unmigrated)}: run manage.py migrate "
                "first, with the same DJANGO_SETTINGS_MODULE"
            )
        now = timezone.now()
        if dry_run:
            for rule in selected:
                self.stdout.write(f"{rule.table}: would delete {engine.count(rule, now=now)}")
            return
        for outcome in engine.prune(selected, now=now, batch_size=size, duty_cycle=duty_cycle):
            extra = ", ".join(f"{n} {label}" for label, n in sorted(outcome.cascaded.items()))
            self.stdout.write(
                f"{outcome.rule.table}: deleted {outcome.deleted}"
                + (f" (with {extra})" if extra else "")
                + f" in {outcome.batches} batch(es)"
            )
