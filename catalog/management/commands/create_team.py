from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from catalog import services


class Command(BaseCommand):
    help = "Create a team: manage.py create_team SLUG --name NAME [--email ADDRESS]"

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--email", default="", help="human contact for owner notices")

    def handle(self, *args, slug, name, email, **options):
        try:
            team = services.team_create(slug=slug, name=name, contact_email=email)
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            ) from exc
        self.stdout.write(f"created team {team.slug} ({team.name})")
