"""Dataset prefix claims and ownership transfers (catalog services)."""

from __future__ import annotations

import pytest

from catalog import errors
from catalog.actors import Actor
from catalog.models import AuditEntry, Claim, Dataset, DatasetTransfer
from catalog.services import datasets, ownership
from problems import ValidationProblem
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

PREFIX = Claim.Kind.DATASET_PREFIX


@pytest.fixture
def sales():
    return Actor(team=TeamFactory(slug="sales"), username="sam")


@pytest.fixture
def ops():
    return Actor(team=TeamFactory(slug="ops"), username="olga")


def test_claim_create_normalises_a_prefix_and_audits_it(sales):
    claim, created = ownership.claim_create(actor=sales, kind=PREFIX, pattern="S3://Lake/sales/")
    assert (claim.pattern, created) == ("s3://lake/sales/", True)
    again, created = ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/")
    assert (again.pk, created) == (claim.pk, False)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.team, entry.actor, entry.dataset) == (
        "claim.created",
        sales.team,
        "user:sam",
        None,
    )
    assert entry.changes == {"kind": [None, PREFIX], "pattern": [None, "s3://lake/sales/"]}


def test_claim_release_is_audited(sales):
    claim, _ = ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/")
    ownership.claim_release(actor=sales, claim_id=claim.pk)
    assert not Claim.objects.exists()
    released = AuditEntry.objects.get(action="claim.released")
    assert released.changes == {"kind": [PREFIX, None], "pattern": ["s3://lake/sales/", None]}


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("s3://lake/sales/", "s3://lake/sales/eu/"),  # ours inside theirs
        ("s3://lake/sales/eu/", "s3://lake/sales/"),  # theirs inside ours
        ("s3://lake/sales/", "S3://LAKE/sales/"),  # the same once normalised
        ("s3://lake/", "s3://lake/sales/"),
    ],
)
def test_claim_create_refuses_a_prefix_overlapping_another_teams(sales, ops, theirs, ours):
    ownership.claim_create(actor=ops, kind=PREFIX, pattern=theirs)
    with pytest.raises(errors.ClaimTaken) as caught:
        ownership.claim_create(actor=sales, kind=PREFIX, pattern=ours)
    assert caught.value.extra["owner"] == "ops"
    assert "ops" in caught.value.detail
    assert not Claim.objects.filter(team=sales.team).exists()


def test_claim_create_allows_neighbouring_prefixes_and_own_nesting(sales, ops):
    ownership.claim_create(actor=ops, kind=PREFIX, pattern="s3://lake/sales_archive/")
    ownership.claim_create(actor=ops, kind=PREFIX, pattern="s3://lakehouse/")
    ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/")
    ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/eu/")
    assert Claim.objects.filter(team=sales.team).count() == 2


def test_claim_create_refuses_a_prefix_over_other_teams_datasets_naming_them(sales, ops):
    theirs = DatasetFactory(namespace="s3://lake", name="sales/orders", owner=ops.team)
    DatasetFactory(namespace="s3://lake", name="sales/ours", owner=sales.team)
    DatasetFactory(namespace="s3://lake", name="sales_archive/x", owner=ops.team)
    with pytest.raises(errors.ClaimOverDatasets) as caught:
        ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/")
    assert caught.value.extra == {
        "datasets": [
            {"id": theirs.pk, "namespace": "s3://lake", "name": "sales/orders", "owner": "ops"}
        ],
        "more": False,
    }
    assert not Claim.objects.exists()
    assert not AuditEntry.objects.exists()


def test_claim_create_lists_a_bounded_number_of_other_teams_datasets(sales, ops):
    for n in range(ownership.CLAIM_CONFLICT_LISTED + 2):
        DatasetFactory(namespace="s3://lake", name=f"sales/t{n:02}", owner=ops.team)
    with pytest.raises(errors.ClaimOverDatasets) as caught:
        ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/")
    assert len(caught.value.extra["datasets"]) == ownership.CLAIM_CONFLICT_LISTED
    assert caught.value.extra["more"] is True


@pytest.mark.parametrize(
    "pattern", ["s3:/lake/sales", "://lake/x", "s3://lake/sa les", "x" * 256, ""]
)
def test_claim_create_rejects_a_malformed_prefix(sales, pattern):
    with pytest.raises(ValidationProblem) as caught:
        ownership.claim_create(actor=sales, kind=PREFIX, pattern=pattern)
    assert [e.field for e in caught.value.errors] == ["pattern"]


def test_dataset_register_inside_another_teams_prefix_is_refused_naming_the_owner(sales, ops):
    ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/")
    with pytest.raises(errors.PrefixClaimed) as caught:
        datasets.dataset_register(actor=ops, namespace="S3://lake", name="sales/orders")
    assert caught.value.extra == {"owner": "sales", "prefix": "s3://lake/sales/"}
    assert "sales" in caught.value.detail
    assert not Dataset.objects.exists()
    # The claimer registers there; the other team registers next to it.
    datasets.dataset_register(actor=sales, namespace="s3://lake", name="sales/orders")
    datasets.dataset_register(actor=ops, namespace="s3://lake", name="sales_archive/orders")


def test_a_released_prefix_no_longer_refuses_registration(sales, ops):
    claim, _ = ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/")
    ownership.claim_release(actor=sales, claim_id=claim.pk)
    assert datasets.dataset_register(actor=ops, namespace="s3://lake", name="sales/x").owner == (
        ops.team
    )


def test_a_transfer_proposed_and_accepted_moves_ownership_and_is_audited(sales, ops):
    dataset = DatasetFactory(namespace="s3://lake", name="sales/orders", owner=ops.team)
    transfer = ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="sales")
    assert (transfer.state, transfer.from_team, transfer.to_team) == (
        DatasetTransfer.State.PROPOSED,
        ops.team,
        sales.team,
    )
    assert Dataset.objects.get().owner == ops.team  # nothing moves until accepted
    with pytest.raises(errors.NotDatasetOwner):  # the proposing side cannot accept
        ownership.dataset_transfer_accept(actor=ops, dataset=dataset, transfer_id=transfer.pk)

    moved = ownership.dataset_transfer_accept(actor=sales, dataset=dataset, transfer_id=transfer.pk)
    assert moved.owner == sales.team
    assert Dataset.objects.get().owner == sales.team
    transfer.refresh_from_db()
    assert (transfer.state, transfer.decided_by) == (DatasetTransfer.State.ACCEPTED, "user:sam")
    assert transfer.decided_at is not None
    entries = list(AuditEntry.objects.filter(dataset=dataset).order_by("id"))
    assert [(e.action, e.team) for e in entries] == [
        ("dataset.transfer_proposed", ops.team),
        ("dataset.transfer_accepted", sales.team),
    ]
    assert entries[1].changes["owner"] == ["ops", "sales"]
    # Now the prefix can be claimed, and the old owner may no longer change the dataset.
    ownership.claim_create(actor=sales, kind=PREFIX, pattern="s3://lake/sales/")
    with pytest.raises(errors.NotDatasetOwner):
        datasets.dataset_update(actor=ops, dataset=moved, description="x")
    with pytest.raises(errors.TransferClosed):
        ownership.dataset_transfer_accept(actor=sales, dataset=dataset, transfer_id=transfer.pk)


@pytest.mark.parametrize("side", ["from", "to"])
def test_either_side_cancels_an_open_transfer(sales, ops, side):
    dataset = DatasetFactory(owner=ops.team)
    transfer = ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="sales")
    actor = ops if side == "from" else sales
    cancelled = ownership.dataset_transfer_cancel(
        actor=actor, dataset=dataset, transfer_id=transfer.pk
    )
    assert cancelled.state == DatasetTransfer.State.CANCELLED
    assert Dataset.objects.get().owner == ops.team
    assert AuditEntry.objects.filter(
        dataset=dataset, action="dataset.transfer_cancelled", team=actor.team
    ).exists()
    with pytest.raises(errors.TransferClosed):
        ownership.dataset_transfer_accept(actor=sales, dataset=dataset, transfer_id=transfer.pk)
    # A new one may be proposed once the old one is closed.
    ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="sales")


def test_transfer_propose_refusals(sales, ops):
    dataset = DatasetFactory(owner=ops.team)
    with pytest.raises(errors.NotDatasetOwner):
        ownership.dataset_transfer_propose(actor=sales, dataset=dataset, to_team="sales")
    with pytest.raises(errors.TeamNotFound):
        ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="nobody")
    with pytest.raises(ValidationProblem):
        ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="ops")
    ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="sales")
    with pytest.raises(errors.TransferPending):
        ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="sales")


def test_a_stranger_does_not_see_or_decide_a_transfer(sales, ops):
    dataset = DatasetFactory(owner=ops.team)
    transfer = ownership.dataset_transfer_propose(actor=ops, dataset=dataset, to_team="sales")
    stranger = Actor(team=TeamFactory(slug="finance"))
    with pytest.raises(errors.TransferNotFound):
        ownership.dataset_transfer_accept(actor=stranger, dataset=dataset, transfer_id=transfer.pk)
    with pytest.raises(errors.TransferNotFound):
        ownership.dataset_transfer_cancel(actor=stranger, dataset=dataset, transfer_id=transfer.pk)


def test_a_transfer_into_a_third_teams_prefix_is_refused(sales, ops):
    finance = Actor(team=TeamFactory(slug="finance"))
    dataset = DatasetFactory(namespace="s3://lake", name="fin/ledger", owner=finance.team)
    transfer = ownership.dataset_transfer_propose(actor=finance, dataset=dataset, to_team="ops")
    # finance hands the dataset to ops, then claims the prefix before ops accepts
    ownership.claim_create(actor=finance, kind=PREFIX, pattern="s3://lake/fin/")
    with pytest.raises(errors.PrefixClaimed) as caught:
        ownership.dataset_transfer_accept(actor=ops, dataset=dataset, transfer_id=transfer.pk)
    assert caught.value.extra["owner"] == "finance"
    assert Dataset.objects.get().owner == finance.team
    with pytest.raises(errors.PrefixClaimed):
        ownership.dataset_transfer_propose(actor=finance, dataset=dataset, to_team="sales")
