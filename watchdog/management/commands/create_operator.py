"""Create (or with ``--update`` change) an operator of the watchdog's on-call pages.

The password never comes from the command line (it would sit in shell history and the
process list): it is read from ``WATCHDOG_OPERATOR_PASSWORD``, else from standard input
(one line) when that is not a terminal, else asked for twice.
"""

import getpass
import os
import sys

from django.core.management.base import BaseCommand, CommandError

from problems import ValidationProblem
from watchdog import operators
from watchdog.models import Operator

PASSWORD_VARIABLE = "WATCHDOG_OPERATOR_PASSWORD"  # noqa: S105 - a variable name


class Command(BaseCommand):
    help = (
        "Create an operator for the watchdog's on-call pages, who sees the monitors of the "
        f"given owner labels (or all). The password is read from ${PASSWORD_VARIABLE}, "
        "standard input, or a prompt."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--label",
            action="append",
            default=[],
            dest="labels",
            help="An owner label (team slug) whose monitors it sees; repeatable.",
        )
        parser.add_argument("--all", action="store_true", help="Sees every monitor.")
        parser.add_argument(
            "--update",
            action="store_true",
            help="Change an existing operator's password (and its labels, when given).",
        )

    def handle(self, *args, username, labels, all, update, **options):
        password = self._password()
        try:
            if update:
                operator = Operator.objects.filter(
                    username=operators.normalise_username(username)
                ).first()
                if operator is None:
                    raise CommandError(f"no operator {username!r}")
                # Labels and --all are replaced only when given.
                given = bool(labels) or all
                operator = operators.operator_update(
                    operator,
                    password=password,
                    labels=labels if given else None,
                    all_labels=all if given else None,
                )
            else:
                operator = operators.operator_create(
                    username=username, password=password, labels=labels, all_labels=all
                )
        except ValidationProblem as problem:
            raise CommandError(
                "; ".join(f"{error.field}: {error.detail}" for error in problem.errors)
            ) from problem
        sees = "every monitor" if operator.all_labels else ", ".join(operator.labels)
        self.stdout.write(f"operator {operator.username} ({sees})")

    def _password(self) -> str:
        if os.environ.get(PASSWORD_VARIABLE):
            return os.environ[PASSWORD_VARIABLE]
        if not sys.stdin.isatty():
            password = sys.stdin.readline().rstrip("\n")
            if not password:
                raise CommandError(f"no password on standard input or in ${PASSWORD_VARIABLE}")
            return password
        password = getpass.getpass("Password: ")
        if password != getpass.getpass("Password (again): "):
            raise CommandError("the passwords differ")
        return password
