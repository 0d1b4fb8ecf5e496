"""The dataset page shows the forecast of the partition due at the next deadline, at
risk or on track, and the upstream that holds it up."""

import pytest
import time_machine

from tests.catalog.test_at_risk import KEY, at, owner, publish, world  # noqa: F401

pytestmark = pytest.mark.django_db


def test_dataset_page_shows_the_forecast_and_its_cause(world, owner, make_person, client_as):  # noqa: F811
    up, down = world
    client = client_as(make_person("olga", owner))
    # The moment and the estimate of tests.catalog.test_at_risk's first warning.
    with time_machine.travel(at(5, 40), tick=False):
        body = client.get(f"/datasets/{down.pk}/").content.decode()
    section = body[body.index('id="forecast"') :]
    assert "at risk" in section[:200]
    assert f"<strong>{KEY}</strong>, due 2026-11-29 08:00 UTC" in section
    assert "expected 2026-11-29 08:15 UTC" in section
    assert f"held up by s3://lake/raw/orders partition {KEY}" in section
    publish(owner, up, KEY, at(5, 41))
    with time_machine.travel(at(5, 42), tick=False):
        body = client.get(f"/datasets/{down.pk}/").content.decode()
    assert "on track" in body[body.index('id="forecast"') :][:200]
