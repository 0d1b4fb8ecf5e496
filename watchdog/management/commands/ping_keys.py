"""Manage ping keys (slug URLs ``/ping/<key>/<slug>``): create (the key is printed once),
list and revoke."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from problems import Problem
from watchdog import ping_keys
from watchdog.api.ping_keys import slug_url_template


class Command(BaseCommand):
    help = "Create, list or revoke ping keys (a created key is printed once)."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", required=True)
        create = commands.add_parser("create", help="Create a key for an owner's monitors.")
        create.add_argument("owner", help="The owner label (a team slug).")
        create.add_argument("--name", default="", help="What the key is for.")
        listing = commands.add_parser("list", help="List keys (the key itself is not kept).")
        listing.add_argument("--owner", help="Only this owner's keys.")
        revoke = commands.add_parser("revoke", help="Revoke a key by its id.")
        revoke.add_argument("id", type=int)

    def handle(self, *args, command, **options):
        now = timezone.now()
        try:
            if command == "create":
                row, key = ping_keys.ping_key_create(
                    owner=options["owner"], name=options["name"], now=now
                )
                self.stdout.write(key)
                self.stderr.write(f"ping key {row.pk} for {row.owner}: {slug_url_template(key)}")
            elif command == "list":
                for row in ping_keys.ping_key_list(owner=options["owner"]):
                    revoked = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else ""
                    self.stdout.write(
                        "\t".join(
                            (str(row.pk), row.owner, f"{row.prefix}…", row.name, revoked)
                        ).rstrip()
                    )
            else:
                row = ping_keys.ping_key_revoke(options["id"], now=now)
                self.stdout.write(f"ping key {row.pk} of {row.owner} revoked")
        except Problem as exc:
            raise CommandError(str(exc)) from exc
