"""Process pending OpenLineage events in the foreground, without Celery."""

import time

from django.core.management.base import BaseCommand
from django.utils import timezone

from lineage.models import LineageEvent
from lineage.services import processing


class Command(BaseCommand):
    help = (
        "Process every pending OpenLineage event now and print what happened; waits (up to "
        "--wait seconds) for events a worker has claimed meanwhile to be done too."
    )

    def add_arguments(self, parser):
        parser.add_argument("--wait", type=float, default=30.0, help="seconds, at most")

    def handle(self, *args, wait, **options):
        started_at = timezone.now()
        deadline = time.monotonic() + wait
        summary = processing.lineage_events_process_due()
        # Events received before this command started, claimed by a worker: wait for them.
        while (
            LineageEvent.objects.filter(
                state=LineageEvent.State.PENDING, received_at__lte=started_at
            ).exists()
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
            more = processing.lineage_events_process_due()
            summary.claimed += more.claimed
            summary.lost += more.lost
            for state, count in more.by_state.items():
                summary.by_state[state] = summary.by_state.get(state, 0) + count
        self.stdout.write(f"lineage events: {summary}")
