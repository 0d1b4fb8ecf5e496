from datetime import UTC, datetime, timedelta

import pytest

from catalog import errors
from catalog.actors import Actor
from catalog.models import ApiKey, AuditEntry, Dataset, Partition, ReadinessEvent
from catalog.services.datasets import dataset_register, dataset_update
from catalog.services.publishing import readiness_publish
from catalog.services.teams import api_key_authenticate, api_key_create, api_key_revoke
from problems import ValidationProblem
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)


def test_api_key_authenticate_writes_last_used_at_at_most_once_a_minute(team):
    key, token = api_key_create(team=team, name="k", scopes=["read"])
    assert api_key_authenticate(token=token, now=NOW).pk == key.pk
    api_key_authenticate(token=token, now=NOW + timedelta(seconds=30))
    key.refresh_from_db()
    assert key.last_used_at == NOW
    api_key_authenticate(token=token, now=NOW + timedelta(seconds=61))
    key.refresh_from_db()
    assert key.last_used_at == NOW + timedelta(seconds=61)


def test_api_key_is_refused_from_its_expiry_and_revocation_instants(team):
    _, token = api_key_create(team=team, name="k", scopes=["read"], expires_at=NOW)
    assert api_key_authenticate(token=token, now=NOW - timedelta(seconds=1)) is not None
    assert api_key_authenticate(token=token, now=NOW) is None
    other, other_token = api_key_create(team=team, name="o", scopes=["read"])
    api_key_revoke(key=other, now=NOW)
    api_key_revoke(key=other, now=NOW + timedelta(hours=1))
    assert ApiKey.objects.get(pk=other.pk).revoked_at == NOW
    assert api_key_authenticate(token=other_token, now=NOW + timedelta(seconds=1)) is None


@pytest.mark.parametrize("token", ["", "tm_", "tm_short_x", "sk_live_abc", "tm_0123456789ab_"])
def test_api_key_authenticate_ignores_malformed_tokens(token):
    assert api_key_authenticate(token=token, now=NOW) is None


def test_dataset_register_audits_initial_rule_values(team):
    dataset = dataset_register(
        actor=Actor(team=team, username="ana"),
        namespace="postgres://WH:5432",
        name="Sales.Orders",
        sla_cron="0 7 * * *",
    )
    assert (dataset.namespace, dataset.name) == ("postgres://wh:5432", "sales.orders")
    entry = AuditEntry.objects.get(dataset=dataset)
    assert entry.actor == "user:ana"
    assert entry.changes["sla_cron"] == [None, "0 7 * * *"]


@pytest.mark.parametrize(
    ("fields", "field", "rule"),
    [
        ({"sla_grace_seconds": 31 * 86400 + 1}, "sla_grace_seconds", "max_value"),
        ({"sla_grace_seconds": 99999999999999999999}, "sla_grace_seconds", "max_value"),
        ({"sla_grace_seconds": -1}, "sla_grace_seconds", "min_value"),
        ({"change_notice_days": 366}, "change_notice_days", "max_value"),
        ({"change_notice_days": 1099511627776}, "change_notice_days", "max_value"),
        ({"change_notice_days": "14"}, "change_notice_days", "invalid"),
    ],
)
def test_dataset_register_and_update_refuse_values_outside_the_api_bounds(
    team, fields, field, rule
):
    actor = Actor(team=team, username="ana")
    with pytest.raises(ValidationProblem) as register:
        dataset_register(actor=actor, namespace="s3://lake", name="raw/x", **fields)
    assert [(e.field, e.rule) for e in register.value.errors] == [(field, rule)]
    dataset = DatasetFactory(owner=team, sla_cron="0 7 * * *", change_notice_days=14)
    with pytest.raises(ValidationProblem) as update:
        dataset_update(actor=actor, dataset=dataset, **fields)
    assert [(e.field, e.rule) for e in update.value.errors] == [(field, rule)]
    dataset.refresh_from_db()
    assert (dataset.sla_grace_seconds, dataset.change_notice_days) == (0, 14)
    assert Dataset.objects.count() == 1
    assert not AuditEntry.objects.exists()


def test_dataset_update_accepts_the_bounds_themselves(team):
    dataset = DatasetFactory(owner=team, sla_cron="0 7 * * *")
    dataset_update(
        actor=Actor(team=team),
        dataset=dataset,
        sla_grace_seconds=Dataset.MAX_SLA_GRACE_SECONDS,
        change_notice_days=Dataset.MAX_CHANGE_NOTICE_DAYS,
    )
    dataset.refresh_from_db()
    assert (dataset.sla_grace_seconds, dataset.change_notice_days) == (2678400, 365)


def test_dataset_update_by_other_team_writes_nothing(team):
    dataset = DatasetFactory(owner=team, sla_cron="")
    with pytest.raises(errors.NotDatasetOwner):
        dataset_update(actor=Actor(team=TeamFactory()), dataset=dataset, sla_cron="0 7 * * *")
    dataset.refresh_from_db()
    assert dataset.sla_cron == ""
    assert not AuditEntry.objects.exists()


def test_readiness_publish_records_the_given_instant(team):
    DatasetFactory(owner=team, namespace="s3://lake", name="raw/x")
    result = readiness_publish(
        actor=Actor(team=team), namespace="s3://lake", name="raw/x", partition="2026-11-28", now=NOW
    )
    assert result.body["ready_at"] == "2026-11-29T07:00:00Z"
    assert Partition.objects.get().current_revision.ready_at == NOW


def test_readiness_publish_failure_leaves_no_rows(team):
    DatasetFactory(owner=team, namespace="s3://lake", name="raw/x")
    with pytest.raises(errors.InvalidPartitionKey):
        readiness_publish(
            actor=Actor(team=team), namespace="s3://lake", name="raw/x", partition="bad", now=NOW
        )
    assert not Partition.objects.exists() and not ReadinessEvent.objects.exists()
