"""Namespace ownership under real concurrency on PostgreSQL: threads released together
by a barrier, each on its own connection, against committed data. Whatever the
interleaving, a prefix claim and a dataset another team registers inside it never both
succeed, and two teams never both claim overlapping prefixes."""

from __future__ import annotations

import pytest

from catalog import errors
from catalog.actors import Actor
from catalog.models import Claim, Dataset
from catalog.services import datasets, ownership
from problems import Problem
from tests.catalog.factories import TeamFactory
from tests.catalog.threads import race

pytestmark = pytest.mark.django_db(transaction=True)

PREFIX = Claim.Kind.DATASET_PREFIX
THREAD_TIMEOUT = 60
ROUNDS = 8


@pytest.fixture
def sales():
    return Actor(team=TeamFactory(slug="sales"), username="sam")


@pytest.fixture
def ops():
    return Actor(team=TeamFactory(slug="ops"), username="olga")


def test_a_claim_and_a_registration_inside_it_never_both_win(sales, ops):
    outcomes = []
    for round_no in range(ROUNDS):
        prefix = f"s3://lake/r{round_no}/sales/"
        claim, register = race(
            [
                lambda prefix=prefix: ownership.claim_create(
                    actor=sales, kind=PREFIX, pattern=prefix
                ),
                lambda round_no=round_no: datasets.dataset_register(
                    actor=ops, namespace="s3://lake", name=f"r{round_no}/sales/orders"
                ),
            ],
            expected=(Problem,),
        )
        claimed = not isinstance(claim, Problem)
        registered = not isinstance(register, Problem)
        # Exactly one wins: the claim is refused over ops's dataset, or the dataset is
        # refused inside sales's prefix.
        assert claimed != registered, (claim, register)
        if claimed:
            assert isinstance(register, errors.PrefixClaimed)
            assert not Dataset.objects.filter(name=f"r{round_no}/sales/orders").exists()
        else:
            assert isinstance(claim, errors.ClaimOverDatasets)
            assert not Claim.objects.filter(pattern=prefix).exists()
        outcomes.append("claim" if claimed else "register")
    assert len(outcomes) == ROUNDS


def test_overlapping_prefix_claims_of_two_teams_never_both_win(sales, ops):
    for round_no in range(ROUNDS):
        outer, inner = f"s3://lake/q{round_no}/", f"s3://lake/q{round_no}/eu/"
        first, second = race(
            [
                lambda outer=outer: ownership.claim_create(actor=sales, kind=PREFIX, pattern=outer),
                lambda inner=inner: ownership.claim_create(actor=ops, kind=PREFIX, pattern=inner),
            ],
            expected=(Problem,),
        )
        won = [not isinstance(outcome, Problem) for outcome in (first, second)]
        assert won.count(True) == 1, (first, second)
        loser = second if won[0] else first
        assert isinstance(loser, errors.ClaimTaken)
        patterns = set(
            Claim.objects.filter(pattern__startswith=f"s3://lake/q{round_no}/").values_list(
                "pattern", flat=True
            )
        )
        assert patterns == ({outer} if won[0] else {inner})
