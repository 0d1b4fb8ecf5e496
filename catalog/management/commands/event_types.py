"""List every notification type Tidemark sends (the event catalog)."""

from django.core.management.base import BaseCommand

from catalog.event_types import EVENT_TYPES
from catalog.event_types.markdown import markdown_page


class Command(BaseCommand):
    help = (
        "List every notification type Tidemark sends; with --markdown, as the documentation "
        "page docs/reference/event-types.md."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--markdown",
            action="store_true",
            help="print the documentation page (redirect it to docs/reference/event-types.md)",
        )

    def handle(self, *args, **options):
        if options["markdown"]:
            self.stdout.write(markdown_page(EVENT_TYPES), ending="")
            return
        for event_type in EVENT_TYPES:
            self.stdout.write(f"{event_type.name}  {', '.join(event_type.audience)}")
