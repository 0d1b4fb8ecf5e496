"""Moving the test database to a migration, for the tests of data migrations."""

from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def apps_at(target: list[tuple[str, str]]) -> Apps:
    """Migrate the default database to ``target`` (``[(app, migration name)]``, forwards
    or backwards) and return the historical models there."""
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps
