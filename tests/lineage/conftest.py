"""Fixtures for lineage tests: a team that claims its job namespace, and receiving and
processing events through the services (no Celery)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from catalog.actors import Actor
from catalog.models import Claim
from lineage.services import processing, receiving
from tests.catalog.factories import TeamFactory
from tests.lineage import events as ev

NOW = datetime(2026, 11, 28, 7, 0, tzinfo=UTC)


@pytest.fixture
def team_a(db):
    """Team ``team-a``, which claims the job namespace ``airflow://team-a``."""
    team = TeamFactory(slug="team-a")
    Claim.objects.create(team=team, kind=Claim.Kind.JOB_NAMESPACE, pattern=ev.JOB[0])
    return team


@pytest.fixture
def receive(team_a) -> Callable[..., receiving.ReceiveResult]:
    """``receive(payload, team=team_a)``: store one event as that team's key would."""

    def send(payload: dict, team=None) -> receiving.ReceiveResult:
        return receiving.lineage_event_receive(
            actor=Actor(team=team or team_a), payload=payload, now=NOW
        )

    return send


@pytest.fixture
def process() -> Callable[[], processing.ProcessSummary]:
    """``process()``: one processing pass over every due event, as a worker runs it."""
    return lambda: processing.lineage_events_process_due(now=NOW)
