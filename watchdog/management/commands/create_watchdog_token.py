"""Create a token for the watchdog's REST API and print it once."""

from django.core.management.base import BaseCommand

from watchdog import tokens


class Command(BaseCommand):
    help = "Create a watchdog API token (printed once; only its digest is kept)."

    def add_arguments(self, parser):
        parser.add_argument("name", help="What the token is for, e.g. 'catalog'.")

    def handle(self, *args, name, **options):
        _, token = tokens.create(name)
        self.stdout.write(token)
