"""List every problem type the catalog's and the watchdog's servers can send."""

from django.core.management.base import BaseCommand

from httpkit import problem_types


class Command(BaseCommand):
    help = (
        "List every problem type the catalog's and the watchdog's servers can send; with "
        "--markdown, as the documentation page docs/reference/problems.md."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--markdown",
            action="store_true",
            help="print the documentation page (redirect it to docs/reference/problems.md)",
        )

    def handle(self, *args, **options):
        types = problem_types.known_types("config.urls_watchdog")
        if options["markdown"]:
            self.stdout.write(problem_types.markdown_page(types), ending="")
            return
        for problem_type in types.values():
            self.stdout.write(f"{problem_type.status}  {problem_type.slug}  {problem_type.title}")
