"""The data migration that gives registered datasets and prefix claims the spelling of
the naming rules (``catalog/migrations/0026``), run for real against PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from tests.migration_states import apps_at

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("catalog", "0026_dataset_unusually_late")]
AFTER = [("catalog", "0027_identities_follow_naming_rules")]
SEEN = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def migrated_back():
    yield apps_at(BEFORE)
    call_command("migrate", verbosity=0)  # the rest of the suite runs at the head


def test_datasets_and_prefix_claims_are_renamed_and_their_old_spelling_kept(migrated_back):
    apps = migrated_back
    Team, Dataset = apps.get_model("catalog", "Team"), apps.get_model("catalog", "Dataset")
    Job, Usage = apps.get_model("catalog", "Job"), apps.get_model("catalog", "DatasetUsage")
    Claim = apps.get_model("catalog", "Claim")
    team = Team.objects.create(name="Sales", slug="sales")
    renamed = Dataset.objects.create(
        owner=team, namespace="s3a://lake", name="/sales/orders/", badge_token="a"
    )
    normal = Dataset.objects.create(owner=team, namespace="s3://lake", name="x", badge_token="b")
    # Two registrations that the rules make one: the second is left for an operator.
    first = Dataset.objects.create(owner=team, namespace="s3://lake", name="y", badge_token="c")
    clash = Dataset.objects.create(owner=team, namespace="s3n://lake", name="y/", badge_token="d")
    job = Job.objects.create(
        namespace="airflow://sales", name="load", first_seen_at=SEEN, last_seen_at=SEEN
    )
    usage = Usage.objects.create(
        job=job,
        dataset=renamed,
        dataset_namespace="s3a://lake",
        dataset_name="/sales/orders/",
        direction="write",
        team=team,
        verified=True,
        first_seen_at=SEEN,
        last_seen_at=SEEN,
    )
    claim = Claim.objects.create(team=team, kind="dataset_prefix", pattern="s3a://lake/sales/")

    apps = apps_at(AFTER)
    Dataset, Alias = apps.get_model("catalog", "Dataset"), apps.get_model("catalog", "DatasetAlias")
    identities = dict(
        (pk, (ns, name)) for pk, ns, name in Dataset.objects.values_list("pk", "namespace", "name")
    )
    assert identities == {
        renamed.pk: ("s3://lake", "sales/orders"),
        normal.pk: ("s3://lake", "x"),
        first.pk: ("s3://lake", "y"),
        clash.pk: ("s3n://lake", "y/"),
    }
    assert list(
        Alias.objects.values_list("alias_namespace", "alias_name", "namespace", "name")
    ) == [("s3a://lake", "/sales/orders/", "s3://lake", "sales/orders")]
    usage = apps.get_model("catalog", "DatasetUsage").objects.get(pk=usage.pk)
    assert (usage.dataset_namespace, usage.dataset_name) == ("s3://lake", "sales/orders")
    claim = apps.get_model("catalog", "Claim").objects.get(pk=claim.pk)
    assert claim.pattern == "s3://lake/sales/"

    # Backwards leaves the data as it is: it is normal under the former rules too.
    Dataset = apps_at(BEFORE).get_model("catalog", "Dataset")
    assert Dataset.objects.get(pk=renamed.pk).namespace == "s3://lake"
