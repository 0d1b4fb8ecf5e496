"""Run one delivery pass in the foreground, without Celery."""

from django.core.management.base import BaseCommand

from catalog import delivery


class Command(BaseCommand):
    help = "Deliver every due notification once, in the foreground, and print what happened."

    def add_arguments(self, parser):
        parser.add_argument("--max-batches", type=int, default=20)

    def handle(self, *args, max_batches, **options):
        sender = delivery.sender_from_settings()
        try:
            summary = delivery.deliver_due(sender=sender, max_batches=max_batches)
        finally:
            sender.close()
        self.stdout.write(str(summary))
