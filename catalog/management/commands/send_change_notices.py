"""Send the change-notice steps that are due, in the foreground, without Celery."""

from django.core.management.base import BaseCommand
from django.utils import timezone

from catalog import change_notices


class Command(BaseCommand):
    help = "Send every due change-notice reminder and effective notification, and print each."

    def handle(self, *args, **options):
        steps = change_notices.send_due(now=timezone.now())
        for step in steps:
            when = f" {step.seconds_before} s before" if step.seconds_before else ""
            self.stdout.write(
                f"change notice {step.notice_id}: {step.kind}{when} ({step.deliveries} deliveries)"
            )
        self.stdout.write(f"{len(steps)} step(s) sent")
