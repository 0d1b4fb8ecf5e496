"""Run the lineage collectors in the foreground, without Celery."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from lineage import collectors
from lineage.services import collecting


class Command(BaseCommand):
    help = (
        "Run every configured lineage collector (TIDEMARK_LINEAGE_COLLECTORS) once, or only "
        "--collector NAME, and print what each observed and recorded."
    )

    def add_arguments(self, parser):
        parser.add_argument("--collector", help="the collector's name in the setting")

    def handle(self, *args, collector, **options):
        names = [collector] if collector else sorted(collectors.configured())
        if collector and collector not in collectors.configured():
            raise CommandError(f"no lineage collector {collector!r} is configured")
        if not names:
            self.stdout.write("no lineage collectors are configured")
        for name in names:
            summary = collecting.collector_run(name=name, now=timezone.now())
            self.stdout.write(f"lineage collector {summary}")
