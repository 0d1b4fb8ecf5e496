import json as jsonlib
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from catalog import declarations, selectors
from catalog.actors import Actor
from catalog.services import datasets
from problems import Problem


class Command(BaseCommand):
    help = (
        "Show the diff between a team's catalog declaration (YAML) and the catalog; "
        "apply it only with --apply (all or nothing)"
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="the YAML declaration (team: ..., datasets: [...])")
        parser.add_argument("--team", help="refuse the file unless it declares this team")
        parser.add_argument("--apply", action="store_true", help="apply (default: dry run)")
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="print the plan as JSON"
        )

    def handle(self, *args, file, team, apply, as_json, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{file}: no such file")
        if path.stat().st_size > declarations.MAX_BYTES:
            raise CommandError(f"{file}: more than {declarations.MAX_BYTES} bytes")
        try:
            document = declarations.validate(declarations.load(path.read_bytes()))
            if team and team != document.team:
                raise CommandError(f"{file} declares team {document.team!r}, not {team!r}")
            owner = selectors.team_get(slug=document.team)
            actor = Actor(team=owner, username="apply_catalog")
            if apply:
                result = datasets.declarations_apply(actor=actor, document=document)
            else:
                result = selectors.declarations_plan(team=owner, document=document)
        except Problem as exc:
            raise CommandError(_problem_text(exc)) from exc
        if as_json:
            body = {**declarations.plan_as_dict(result), "dry_run": not apply}
            self.stdout.write(_dumps(body))
            return
        for line in declarations.plan_as_text(result):
            self.stdout.write(line)
        if not result.changed:
            self.stdout.write("no changes")
        elif apply:
            self.stdout.write(self.style.SUCCESS("applied"))
        else:
            self.stdout.write("dry run: nothing changed; run again with --apply to apply")


def _dumps(body) -> str:
    return jsonlib.dumps(body, indent=2, sort_keys=False)


def _problem_text(exc: Problem) -> str:
    lines = [f"{exc.code}: {exc.detail}"]
    lines += [f"  {e.field}: {e.detail} ({e.rule})" for e in exc.errors]
    return "\n".join(lines)
