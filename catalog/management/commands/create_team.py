from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from catalog.services import teams


class Command(BaseCommand):
    help = (
        "Create a team: manage.py create_team SLUG --name NAME [--email ADDRESS] "
        "[--paging-routing-key KEY]"
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--email", default="", help="human contact for owner notices")
        parser.add_argument(
            "--paging-routing-key",
            default="",
            help="on-call PagerDuty Events API v2 routing key, paged by the watchdog when a "
            "critical dataset of the team misses its deadline",
        )

    def handle(self, *args, slug, name, email, paging_routing_key, **options):
        try:
            team = teams.team_create(
                slug=slug, name=name, contact_email=email, paging_routing_key=paging_routing_key
            )
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            ) from exc
        self.stdout.write(f"created team {team.slug} ({team.name})")
