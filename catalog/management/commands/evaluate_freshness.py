"""Run one freshness evaluation in the foreground, without Celery."""

from django.core.management.base import BaseCommand
from django.utils import timezone

from catalog import freshness


class Command(BaseCommand):
    help = "Judge every SLA deadline whose grace has passed and print each late partition."

    def handle(self, *args, **options):
        late = freshness.evaluate_due(now=timezone.now())
        for report in late:
            self.stdout.write(
                f"late: {report.dataset} partition {report.partition} "
                f"(deadline {report.deadline_at:%Y-%m-%d %H:%M} UTC)"
            )
        self.stdout.write(f"{len(late)} partition(s) newly late")
