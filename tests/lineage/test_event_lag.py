"""The lineage queue's measured lag (``lineage.selectors.event_lag``), which lineage hands
to Tidemark's self-monitoring as the ``lineage`` system monitor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from catalog import self_monitoring
from lineage import selectors
from lineage.models import LineageEvent
from tests.catalog.factories import TeamFactory

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LINEAGE = "tidemark:system:lineage"


def _event(team, key: str, *, due_at: datetime, state=LineageEvent.State.PENDING):
    return LineageEvent.objects.create(
        team=team,
        kind=LineageEvent.Kind.RUN,
        event_time=NOW,
        payload={},
        fingerprint=key,
        next_attempt_at=due_at,
        state=state,
    )


@pytest.mark.django_db
def test_lineage_is_unhealthy_once_the_oldest_due_event_waited_the_threshold():
    team = TeamFactory(slug="orders")
    threshold = timedelta(seconds=settings.TIDEMARK_SELF_MONITORING["lineage_lag_seconds"])
    assert selectors.event_lag(NOW) is None
    _event(team, "processed", due_at=NOW - 10 * threshold, state=LineageEvent.State.PROCESSED)
    _event(team, "failed", due_at=NOW - 10 * threshold, state=LineageEvent.State.FAILED)
    _event(team, "retry later", due_at=NOW + timedelta(minutes=1))
    assert selectors.event_lag(NOW) is None

    _event(team, "waiting", due_at=NOW - threshold + timedelta(seconds=1))

    assert selectors.event_lag(NOW) == threshold - timedelta(seconds=1)
    assert self_monitoring.health(now=NOW)[LINEAGE]
    assert not self_monitoring.health(now=NOW + timedelta(seconds=1))[LINEAGE]
