from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from catalog import errors, selectors
from catalog.models import ApiKey
from catalog.services import teams


class Command(BaseCommand):
    help = "Create an API key for TEAM and print it once: manage.py create_api_key TEAM"

    def add_arguments(self, parser):
        parser.add_argument("team", help="team slug")
        parser.add_argument("--name", default="cli")
        parser.add_argument(
            "--scopes",
            default="publish,lineage,read,manage",
            help=f"comma-separated, from {', '.join(ApiKey.Scope.values)}",
        )
        parser.add_argument(
            "--expires-in-days", type=int, default=None, help="1 to 3650; default: never"
        )

    def handle(self, *args, team, name, scopes, expires_in_days, **options):
        try:
            team_obj = selectors.team_get(slug=team)
        except errors.TeamNotFound as exc:
            raise CommandError(exc.detail) from exc
        if expires_in_days is not None and not 1 <= expires_in_days <= 3650:
            raise CommandError("--expires-in-days must be between 1 and 3650")
        expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
        try:
            _, token = teams.api_key_create(
                team=team_obj,
                name=name,
                scopes=[s.strip() for s in scopes.split(",") if s.strip()],
                expires_at=expires_at,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stderr.write(f"API key for team {team} (shown once; store it now):")
        self.stdout.write(token)
