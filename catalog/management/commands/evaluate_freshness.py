"""Run one freshness evaluation in the foreground, without Celery."""

from django.core.management.base import BaseCommand
from django.utils import timezone

from catalog import freshness


class Command(BaseCommand):
    help = (
        "Judge every SLA deadline whose grace has passed and print each late partition, then "
        "close the late incidents whose partition has arrived."
    )

    def handle(self, *args, **options):
        now = timezone.now()
        late = freshness.evaluate_due(now=now)
        for report in late:
            self.stdout.write(
                f"late: {report.dataset} partition {report.partition} "
                f"(deadline {report.deadline_at:%Y-%m-%d %H:%M} UTC)"
            )
        self.stdout.write(f"{len(late)} partition(s) newly late")
        # As the beat's evaluation does: close what a publish left open (a lost race).
        recovered = freshness.recover_arrived(now=now)
        self.stdout.write(f"{recovered} late partition(s) found arrived and recovered")
