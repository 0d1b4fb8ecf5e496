"""Restatements: staging a new version of a range of partitions, promoting it at once or
abandoning it, through the catalog's services."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from catalog import errors, restatements, selectors
from catalog.actors import Actor
from catalog.models import (
    ApiKey,
    AuditEntry,
    Dataset,
    Delivery,
    LatePartition,
    Notification,
    Partition,
    PartitionRevision,
    Restatement,
)
from catalog.services.publishing import readiness_publish
from catalog.services.teams import api_key_create
from problems import ValidationProblem
from tests.catalog.factories import DatasetFactory, SubscriptionFactory, TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
KEYS = [f"2026-11-{day:02d}" for day in range(20, 27)]  # seven days


def _actor(team, **kwargs) -> Actor:
    key, _ = api_key_create(team=team, name="k", scopes=ApiKey.Scope.values, **kwargs)
    return Actor(team=team, api_key=key)


@pytest.fixture
def owner():
    return TeamFactory(slug="orders")


@pytest.fixture
def actor(owner):
    return _actor(owner)


@pytest.fixture
def dataset(owner, actor):
    dataset = DatasetFactory(owner=owner, namespace="s3://lake", name="raw/orders")
    for key in KEYS:
        _publish(actor, dataset, key, version="v1", code_version="abc1")
    return dataset


@pytest.fixture
def subscriber(dataset):
    return SubscriptionFactory(dataset=dataset, team=TeamFactory(slug="analytics"))


def _publish(actor, dataset, key, **fields):
    return readiness_publish(
        actor=actor,
        namespace=dataset.namespace,
        name=dataset.name,
        partition=key,
        now=fields.pop("now", NOW),
        **fields,
    )


def _open(actor, dataset, first=KEYS[0], last=KEYS[-1], version="v2", **fields):
    return restatements.restatement_open(
        actor=actor,
        dataset=dataset,
        version=version,
        first_partition=first,
        last_partition=last,
        code_version=fields.pop("code_version", "def2"),
        now=NOW,
        **fields,
    )


def _stage_all(actor, dataset, restatement, keys=KEYS):
    for key in keys:
        result = _publish(actor, dataset, key, restatement=restatement.pk, code_version="def2")
        assert result.status_code == 201


def _current_versions(dataset) -> dict[str, str]:
    return dict(
        Partition.objects.filter(dataset=dataset).values_list("key", "current_revision__version")
    )


def test_open_records_the_range_its_keys_and_who(actor, dataset):
    restatement = _open(actor, dataset, reason="fix currency rounding")
    assert restatement.state == Restatement.State.STAGED
    assert restatement.partition_keys == KEYS
    assert restatement.opened_by == actor.label and restatement.opened_at == NOW
    assert restatement.code_version == "def2"
    assert AuditEntry.objects.filter(action="restatement.opened", dataset=dataset).count() == 1


@pytest.mark.parametrize(
    ("first", "last", "code", "rule"),
    [
        (KEYS[3], KEYS[1], "invalid_restatement_range", "range_order"),
        (KEYS[0], "2026-11-28", "invalid_restatement_range", "partitions_exist"),
        ("2026-11", KEYS[1], "invalid_partition_key", None),
    ],
)
def test_open_refuses_a_bad_range_naming_the_rule(actor, dataset, first, last, code, rule):
    with pytest.raises(errors.Problem) as caught:
        _open(actor, dataset, first=first, last=last)
    assert caught.value.code == code
    assert caught.value.extra.get("rule") == rule
    if rule == "partitions_exist":
        assert caught.value.extra["unknown_partitions"] == ["2026-11-27", "2026-11-28"]
    assert not Restatement.objects.exists()


def test_open_refuses_a_used_version_and_another_team(actor, dataset):
    with pytest.raises(errors.RestatementExists):
        _open(actor, dataset, version="v1")
    with pytest.raises(errors.NotDatasetOwner):
        _open(_actor(TeamFactory(slug="other")), dataset)


def test_staged_revisions_are_ready_but_not_current_and_tell_no_one(actor, dataset, subscriber):
    restatement = _open(actor, dataset)
    deliveries = Delivery.objects.count()
    _stage_all(actor, dataset, restatement)
    assert set(_current_versions(dataset).values()) == {"v1"}
    staged = PartitionRevision.objects.filter(restatement=restatement)
    assert staged.count() == 7
    assert {r.state for r in staged} == {"ready"} and {r.code_version for r in staged} == {"def2"}
    assert Delivery.objects.count() == deliveries
    assert (
        selectors.partition_latest_ready(dataset=dataset, now=NOW).current_revision.version == "v1"
    )


def test_staging_repeats_are_no_ops_and_a_failed_one_may_become_ready(actor, dataset):
    restatement = _open(actor, dataset)
    first = _publish(actor, dataset, KEYS[0], restatement=restatement.pk, state="failed")
    assert first.status_code == 201 and first.body["restatement"] == restatement.pk
    again = _publish(actor, dataset, KEYS[0], restatement=restatement.pk, state="failed")
    assert again.status_code == 200
    ready = _publish(actor, dataset, KEYS[0], restatement=restatement.pk, version="v2")
    assert ready.status_code == 201 and ready.body["state"] == "ready"
    assert ready.body["current_version"] == "v1"
    with pytest.raises(errors.RevisionAlreadyReady):
        _publish(actor, dataset, KEYS[0], restatement=restatement.pk, state="failed")


def test_staging_outside_the_range_or_into_a_closed_restatement_is_refused(actor, dataset):
    restatement = _open(actor, dataset, first=KEYS[0], last=KEYS[2])
    with pytest.raises(errors.PartitionOutsideRestatement) as caught:
        _publish(actor, dataset, KEYS[3], restatement=restatement.pk)
    assert caught.value.extra["rule"] == "partition_in_range"
    with pytest.raises(ValidationProblem):
        _publish(actor, dataset, KEYS[0], restatement=restatement.pk, version="v3")
    restatements.restatement_abandon(actor=actor, restatement=restatement, now=NOW)
    with pytest.raises(errors.RestatementClosed) as caught:
        _publish(actor, dataset, KEYS[0], restatement=restatement.pk)
    assert caught.value.extra == {"rule": "restatement_staged", "state": "abandoned"}
    with pytest.raises(errors.RestatementNotFound):
        _publish(actor, dataset, KEYS[0], restatement=restatement.pk + 100)


def test_staging_is_for_the_owner_or_a_delegated_key(actor, dataset):
    restatement = _open(actor, dataset)
    orchestrator = TeamFactory(slug="orchestrator")
    with pytest.raises(errors.PublishNotAllowed):
        _publish(_actor(orchestrator), dataset, KEYS[0], restatement=restatement.pk)
    key, _ = api_key_create(team=orchestrator, name="o", scopes=[ApiKey.Scope.PUBLISH])
    key.delegated_datasets.add(dataset)
    result = _publish(Actor(orchestrator, key), dataset, KEYS[0], restatement=restatement.pk)
    assert result.status_code == 201


def test_a_staged_version_cannot_be_made_current_by_a_plain_publish(actor, dataset):
    restatement = _open(actor, dataset)
    _publish(actor, dataset, KEYS[0], restatement=restatement.pk)
    with pytest.raises(errors.RevisionStaged):
        _publish(actor, dataset, KEYS[0], version="v2")
    assert _current_versions(dataset)[KEYS[0]] == "v1"


def test_promotion_is_refused_naming_the_partitions_not_ready(actor, dataset):
    restatement = _open(actor, dataset)
    _stage_all(actor, dataset, restatement, keys=KEYS[:5])
    _publish(actor, dataset, KEYS[5], restatement=restatement.pk, state="failed")
    with pytest.raises(errors.RestatementIncomplete) as caught:
        restatements.restatement_promote(actor=actor, restatement=restatement, now=NOW)
    assert caught.value.extra["missing_partitions"] == KEYS[5:]
    assert caught.value.extra["partitions"] == [
        {"partition": KEYS[5], "state": "failed"},
        {"partition": KEYS[6], "state": "missing"},
    ]
    assert set(_current_versions(dataset).values()) == {"v1"}
    restatement.refresh_from_db()
    assert restatement.state == Restatement.State.STAGED


def test_promotion_needs_manifests_where_the_dataset_completes_by_manifest(actor, dataset):
    Dataset.objects.filter(pk=dataset.pk).update(
        completion_signal=Dataset.CompletionSignal.MANIFEST
    )
    dataset.refresh_from_db()
    restatement = _open(actor, dataset, first=KEYS[0], last=KEYS[1])
    _publish(actor, dataset, KEYS[0], restatement=restatement.pk, manifest={"expected_files": 2})
    _publish(actor, dataset, KEYS[1], restatement=restatement.pk)
    with pytest.raises(errors.RestatementIncomplete) as caught:
        restatements.restatement_promote(actor=actor, restatement=restatement, now=NOW)
    assert caught.value.extra["partitions"] == [{"partition": KEYS[1], "state": "no_manifest"}]


def test_promotion_repoints_every_partition_and_tells_subscribers_once(
    actor, dataset, subscriber, django_capture_on_commit_callbacks
):
    restatement = _open(actor, dataset)
    _stage_all(actor, dataset, restatement)
    later = NOW + timedelta(hours=1)
    with django_capture_on_commit_callbacks():
        promoted = restatements.restatement_promote(actor=actor, restatement=restatement, now=later)
    assert promoted.state == Restatement.State.PROMOTED and promoted.closed_at == later
    assert set(_current_versions(dataset).values()) == {"v2"}
    notification = Notification.objects.get(type=Notification.Type.DATASET_VERSION_PROMOTED)
    data = notification.payload["data"]
    assert (data["version"], data["first_partition"], data["last_partition"]) == (
        "v2",
        KEYS[0],
        KEYS[-1],
    )
    assert [p["partition"] for p in data["partitions"]] == KEYS
    assert data["partitions"][0] == {
        "partition": KEYS[0],
        "version": "v2",
        "code_version": "def2",
        "previous_version": "v1",
        "previous_code_version": "abc1",
    }
    assert Delivery.objects.filter(notification=notification).count() == 1
    assert AuditEntry.objects.filter(action="restatement.promoted").count() == 1
    with pytest.raises(errors.RestatementClosed):
        restatements.restatement_promote(actor=actor, restatement=restatement, now=later)
    with pytest.raises(errors.RestatementClosed):
        restatements.restatement_abandon(actor=actor, restatement=restatement, now=later)


def test_after_promotion_a_plain_publish_of_the_version_is_a_no_op(actor, dataset):
    restatement = _open(actor, dataset)
    _stage_all(actor, dataset, restatement)
    restatements.restatement_promote(actor=actor, restatement=restatement, now=NOW)
    assert _publish(actor, dataset, KEYS[0], version="v2").status_code == 200


def test_abandon_changes_nothing_visible(actor, dataset, subscriber):
    restatement = _open(actor, dataset)
    _stage_all(actor, dataset, restatement)
    before = list(selectors.partition_list(dataset=dataset).values("key", "current_revision"))
    notifications = Notification.objects.count()
    abandoned = restatements.restatement_abandon(actor=actor, restatement=restatement, now=NOW)
    assert abandoned.state == Restatement.State.ABANDONED
    after = list(selectors.partition_list(dataset=dataset).values("key", "current_revision"))
    assert after == before
    assert Notification.objects.count() == notifications
    assert AuditEntry.objects.filter(action="restatement.abandoned").count() == 1


def _ready_for_freshness(dataset, key: str) -> bool:
    """Whether freshness counts ``key`` as arrived: its current revision is ready."""
    return Partition.objects.filter(
        dataset=dataset, key=key, current_revision__state=PartitionRevision.State.READY
    ).exists()


def test_staging_does_not_change_freshness_and_promotion_closes_a_late_partition(actor, owner):
    dataset = DatasetFactory(owner=owner, sla_cron="0 6 * * *", sla_grace_seconds=0)
    _publish(actor, dataset, KEYS[0], version="v1", state="failed")
    LatePartition.objects.create(
        dataset=dataset, partition_key=KEYS[0], deadline_at=NOW, late_at=NOW
    )
    restatement = _open(actor, dataset, first=KEYS[0], last=KEYS[0])
    _publish(actor, dataset, KEYS[0], restatement=restatement.pk)
    assert LatePartition.objects.get().recovered_at is None
    assert _ready_for_freshness(dataset, KEYS[0]) is False
    restatements.restatement_promote(actor=actor, restatement=restatement, now=NOW)
    assert LatePartition.objects.get().recovered_at == NOW
    assert _ready_for_freshness(dataset, KEYS[0]) is True


def test_progress_lists_each_partition_of_the_range(actor, dataset, django_assert_num_queries):
    restatement = _open(actor, dataset)
    _stage_all(actor, dataset, restatement, keys=KEYS[:2])
    with django_assert_num_queries(2):
        loaded = selectors.restatement_get(dataset=dataset, restatement_id=restatement.pk)
        rows = selectors.restatement_progress(loaded)
    assert [r["state"] for r in rows] == ["ready", "ready"] + ["missing"] * 5
    assert rows[0]["current"] is False and rows[0]["code_version"] == "def2"


def test_a_retry_of_a_version_published_while_staged_does_not_undo_the_promotion(actor, dataset):
    restatement = _open(actor, dataset)
    _stage_all(actor, dataset, restatement)
    assert _publish(actor, dataset, KEYS[0], version="v1b").status_code == 201
    assert _current_versions(dataset)[KEYS[0]] == "v1b"  # a plain publish still serves at once
    restatements.restatement_promote(actor=actor, restatement=restatement, now=NOW)
    assert _publish(actor, dataset, KEYS[0], version="v1b").status_code == 200
    assert _current_versions(dataset)[KEYS[0]] == "v2"
    assert _publish(actor, dataset, KEYS[0], version="v3").status_code == 201
    assert _current_versions(dataset)[KEYS[0]] == "v3"
