"""Run the watchdog loop in the foreground (``--once`` for one cycle)."""

from django.conf import settings
from django.core.management.base import BaseCommand

from watchdog import loop, paging


class Command(BaseCommand):
    help = "Judge due deadlines, send pages and ping the heartbeat, every --interval seconds."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Run one cycle and exit.")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="Seconds between cycles (default WATCHDOG_LOOP_SECONDS).",
        )

    def handle(self, *args, once=False, interval=None, **options):
        sender = paging.sender_from_settings()
        if once:
            report = loop.run_cycle(sender=sender)
            for missed in report.missed:
                self.stdout.write(
                    f"missed: {missed.monitor} deadline {missed.deadline_at:%Y-%m-%d %H:%M} UTC"
                    + (f" partition {missed.partition}" if missed.partition else "")
                )
            self.stdout.write(
                f"{len(report.missed)} missed deadline(s), {report.pages_attempted} page(s) "
                f"attempted, heartbeat {report.heartbeat}, {report.duration_ms:.1f} ms"
            )
            return
        loop.run_forever(interval=interval or settings.WATCHDOG_LOOP_SECONDS, sender=sender)
