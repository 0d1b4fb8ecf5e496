"""The catalog's OpenAPI document against the catalog's real web server (gunicorn, as the
Procfile runs it): schemathesis sends what the document describes, and things it does not,
to every operation, with a key holding every scope on a seeded database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import ApiKey
from catalog.services import publishing
from catalog.services.teams import api_key_create
from tests.api.servers import CatalogServer
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory
from tests.catalog.worker_helpers import free_port, worker_environment
from tests.schemathesis_helpers import run_schemathesis

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.timeout(900),
]


def _seed() -> str:
    """A team with a dataset, a ready partition and a subscription; returns a key with
    every scope."""
    from django.conf import settings

    team = TeamFactory(slug="orders")
    dataset = DatasetFactory(owner=team, namespace="s3://lake", name="orders/daily")
    SubscriptionFactory(dataset=dataset, team=team)
    key, token = api_key_create(team=team, name="schemathesis", scopes=ApiKey.Scope.values)
    publishing.readiness_publish(
        actor=_actor(team, key),
        idempotency_key=None,
        now=timezone.now(),
        namespace=dataset.namespace,
        name=dataset.name,
        partition=(timezone.now() - timedelta(days=1)).strftime("%Y-%m-%d"),
        state="ready",
    )
    assert settings.CELERY_BROKER_URL
    return token


def _actor(team, key):
    from catalog.actors import Actor

    return Actor(team=team, api_key=key)


def test_the_catalog_api_does_what_its_openapi_document_says(tmp_path, settings):
    token = _seed()
    env = worker_environment(broker_url=settings.CELERY_BROKER_URL, lease_seconds=60)
    server = CatalogServer(
        name="catalog-web", log_path=tmp_path / "web.log", env=env, port=free_port()
    ).start()
    try:
        server.wait_ready()
        run = run_schemathesis(
            schema_url=f"{server.url}/api/schema/?format=json",
            base_url=server.url,
            token=token,
            report_dir=tmp_path / "report",
        )
    finally:
        server.kill()
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-3000:]
