"""Registered datasets and dataset-prefix claims take the spelling the OpenLineage naming
rules now give them (``catalog.naming``: ``s3a://`` is ``s3://``, no slashes around an
object key, no credentials in a host:port namespace, ``bigquery://`` is ``bigquery``), so
that lookups, which normalise, still find them.

Data only, and minimal: a dataset whose new identity another registered dataset already
has is left as it is, for an operator to merge the two, and so is a claim whose new
pattern another claim holds. A renamed
dataset's old spelling is kept as a ``DatasetAlias`` spelling of the new identity, and the
usage rows linked to it follow the rename where no row has the new identity already.

Reversing changes nothing back: every new spelling is also normal under the former rules,
so the former code reads the data as it is; the kept spellings say what was renamed.
"""

from django.db import migrations
from django.utils import timezone

from catalog.identity import IdentityError, normalise_dataset_identity, normalise_dataset_prefix


def follow_naming_rules(apps, schema_editor):
    Dataset = apps.get_model("catalog", "Dataset")
    DatasetAlias = apps.get_model("catalog", "DatasetAlias")
    DatasetUsage = apps.get_model("catalog", "DatasetUsage")
    Claim = apps.get_model("catalog", "Claim")
    now = timezone.now()

    for dataset in Dataset.objects.order_by("id").iterator():
        try:
            new = normalise_dataset_identity(dataset.namespace, dataset.name)
        except IdentityError:
            continue  # registered under rules since tightened: left for an operator
        old = (dataset.namespace, dataset.name)
        if (new.namespace, new.name) == old:
            continue
        if Dataset.objects.filter(namespace=new.namespace, name=new.name).exists():
            continue
        Dataset.objects.filter(pk=dataset.pk).update(namespace=new.namespace, name=new.name)
        DatasetAlias.objects.filter(namespace=old[0], name=old[1]).update(
            namespace=new.namespace, name=new.name
        )
        DatasetAlias.objects.get_or_create(
            alias_namespace=old[0],
            alias_name=old[1],
            defaults={
                "namespace": new.namespace,
                "name": new.name,
                "kind": "spelling",
                "first_seen_at": now,
            },
        )
        for usage in DatasetUsage.objects.filter(
            dataset_id=dataset.pk, dataset_namespace=old[0], dataset_name=old[1]
        ):
            taken = DatasetUsage.objects.filter(
                job_id=usage.job_id,
                dataset_namespace=new.namespace,
                dataset_name=new.name,
                direction=usage.direction,
                team_id=usage.team_id,
                verified=usage.verified,
            ).exists()
            if not taken:
                DatasetUsage.objects.filter(pk=usage.pk).update(
                    dataset_namespace=new.namespace, dataset_name=new.name
                )

    for claim in Claim.objects.filter(kind="dataset_prefix").order_by("id"):
        try:
            pattern = normalise_dataset_prefix(claim.pattern)
        except IdentityError:
            continue
        if pattern == claim.pattern:
            continue
        if not Claim.objects.filter(kind=claim.kind, pattern=pattern).exists():
            Claim.objects.filter(pk=claim.pk).update(pattern=pattern)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0026_dataset_unusually_late"),
    ]

    operations = [
        migrations.RunPython(follow_naming_rules, migrations.RunPython.noop),
    ]
