"""Dataset lifecycle rules: deprecation with a sunset one notice period away, a change notice
in effect (or a written override) before deprecating or retiring, and what retired and
deprecated datasets do to publishing and subscribing."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from catalog import errors
from catalog.actors import Actor
from catalog.change_notices import change_notice_announce, send_due
from catalog.models import AuditEntry, ChangeNotice, Dataset, Partition
from catalog.services.datasets import dataset_update
from catalog.services.publishing import readiness_publish
from catalog.services.subscriptions import subscription_create
from problems import ValidationProblem
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def dataset():
    return DatasetFactory(
        owner=TeamFactory(slug="orders"),
        namespace="s3://lake",
        name="raw/orders",
        change_notice_days=14,
    )


def update(dataset, at=NOW, **changes):
    with time_machine.travel(at, tick=False):
        return dataset_update(
            actor=Actor(team=dataset.owner, username="ana"), dataset=dataset, **changes
        )


def notice(dataset, kind, effective_at, at=NOW):
    return change_notice_announce(
        actor=Actor(team=dataset.owner, username="ana"),
        dataset=dataset,
        kind=kind,
        description=f"{kind} of raw/orders",
        effective_at=effective_at,
        now=at,
    )


def test_deprecating_with_a_sunset_sooner_than_the_notice_period_is_refused(dataset):
    notice(dataset, ChangeNotice.Kind.DEPRECATION, NOW + 14 * DAY)
    later = NOW + 14 * DAY
    with pytest.raises(errors.SunsetTooSoon) as refused:
        update(dataset, at=later, lifecycle="deprecated", sunset_at=later + 13 * DAY)
    problem = refused.value.document()
    assert (problem["status"], problem["earliest_sunset_at"]) == (422, "2026-12-27T07:00:00Z")
    assert problem["errors"][0]["field"] == "sunset_at"
    dataset.refresh_from_db()
    assert (dataset.lifecycle, dataset.sunset_at) == ("active", None)


def test_deprecating_needs_a_sunset(dataset):
    with pytest.raises(ValidationProblem) as refused:
        update(dataset, lifecycle="deprecated", override_reason="vendor gone")
    assert [(e.field, e.rule) for e in refused.value.errors] == [
        ("sunset_at", "required_when_deprecated")
    ]


def test_deprecating_needs_a_deprecation_notice_in_effect(dataset):
    sunset = NOW + 60 * DAY
    with pytest.raises(errors.LifecycleNoticeRequired) as refused:
        update(dataset, lifecycle="deprecated", sunset_at=sunset)
    assert refused.value.extra == {"rule": "change_notice", "notice_kind": "deprecation"}

    notice(dataset, ChangeNotice.Kind.DEPRECATION, NOW + 14 * DAY)
    with pytest.raises(errors.LifecycleNoticeRequired):  # announced, not yet in effect
        update(dataset, at=NOW + 13 * DAY, lifecycle="deprecated", sunset_at=sunset)
    # In effect at its effective_at, even before the scheduler has run.
    updated = update(dataset, at=NOW + 14 * DAY, lifecycle="deprecated", sunset_at=sunset)
    assert (updated.lifecycle, updated.sunset_at) == ("deprecated", sunset)
    entry = AuditEntry.objects.get(action="dataset.updated")
    assert entry.changes["lifecycle"] == ["active", "deprecated"]
    assert not AuditEntry.objects.filter(action="dataset.lifecycle_override").exists()


def test_a_lifecycle_override_with_a_reason_is_audited(dataset):
    updated = update(
        dataset,
        lifecycle="deprecated",
        sunset_at=NOW + 30 * DAY,
        override_reason="legal asked us to stop publishing it",
    )
    assert updated.lifecycle == "deprecated"
    entry = AuditEntry.objects.get(action="dataset.lifecycle_override")
    assert entry.changes == {
        "lifecycle": ["active", "deprecated"],
        "override_reason": [None, "legal asked us to stop publishing it"],
    }


def test_an_override_reason_without_a_lifecycle_change_is_refused(dataset):
    with pytest.raises(ValidationProblem) as refused:
        update(dataset, description="x", override_reason="because")
    assert refused.value.errors[0].field == "override_reason"


def test_retiring_needs_a_retirement_notice_or_a_passed_sunset(dataset):
    with pytest.raises(errors.LifecycleNoticeRequired) as refused:
        update(dataset, lifecycle="retired")
    assert refused.value.extra["notice_kind"] == "retirement"

    retirement = notice(dataset, ChangeNotice.Kind.RETIREMENT, NOW + 14 * DAY)
    send_due(now=NOW + 14 * DAY)
    retirement.refresh_from_db()
    assert retirement.state == "effective"
    assert update(dataset, at=NOW + 15 * DAY, lifecycle="retired").lifecycle == "retired"


def test_a_deprecated_dataset_retires_once_its_sunset_has_passed(dataset):
    sunset = NOW + 30 * DAY
    update(dataset, lifecycle="deprecated", sunset_at=sunset, override_reason="x")
    with pytest.raises(errors.LifecycleNoticeRequired):
        update(dataset, at=sunset - DAY, lifecycle="retired")
    assert update(dataset, at=sunset, lifecycle="retired").lifecycle == "retired"


def test_moving_the_sunset_of_a_deprecated_dataset_keeps_the_notice_period(dataset):
    update(dataset, lifecycle="deprecated", sunset_at=NOW + 30 * DAY, override_reason="x")
    with pytest.raises(errors.SunsetTooSoon):
        update(dataset, at=NOW + 20 * DAY, sunset_at=NOW + 30 * DAY + DAY)  # 11 days away
    assert update(dataset, at=NOW + 20 * DAY, sunset_at=NOW + 40 * DAY).sunset_at == NOW + 40 * DAY


def test_retired_dataset_refuses_readiness_naming_the_rule(dataset):
    Dataset.objects.filter(pk=dataset.pk).update(lifecycle="retired")
    with pytest.raises(errors.DatasetRetired) as refused:
        readiness_publish(
            actor=Actor(team=dataset.owner),
            namespace="s3://lake",
            name="raw/orders",
            partition="2026-11-28",
            now=NOW,
        )
    assert refused.value.document()["status"] == 409
    assert [(e.field, e.rule) for e in refused.value.errors] == [("name", "lifecycle_retired")]
    assert not Partition.objects.exists()


def test_subscribing_to_a_deprecated_dataset_succeeds_with_a_warning(dataset):
    Dataset.objects.filter(pk=dataset.pk).update(lifecycle="deprecated", sunset_at=NOW + 30 * DAY)
    dataset.refresh_from_db()
    result = subscription_create(actor=Actor(team=TeamFactory(slug="analytics")), dataset=dataset)
    assert result.created
    [warning] = result.warnings
    assert (warning.code, warning.sunset_at) == ("dataset_deprecated", NOW + 30 * DAY)
    assert "2026-12-29T07:00:00Z" in warning.detail


def test_subscribing_to_an_active_dataset_has_no_warning_and_a_retired_one_is_refused(dataset):
    consumer = Actor(team=TeamFactory(slug="analytics"))
    assert subscription_create(actor=consumer, dataset=dataset).warnings == ()
    Dataset.objects.filter(pk=dataset.pk).update(lifecycle="retired")
    dataset.refresh_from_db()
    with pytest.raises(errors.DatasetRetired):
        subscription_create(actor=consumer, dataset=dataset)
