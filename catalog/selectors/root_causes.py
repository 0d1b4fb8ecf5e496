"""Reads for root causes (``catalog.root_causes``): what a late partition was found to be
caused by, and the blast radius of an upstream dataset (the lateness it causes)."""

from __future__ import annotations

from ..models import Dataset, LatePartition, Team

MAX_LISTED = 20  # datasets and teams named in a blast radius; the counts say how many


def late_cause(*, dataset: Dataset, partition: str | None) -> dict | None:
    """The root cause recorded on the open late row of ``partition`` of ``dataset``, as
    ``{namespace, name, partition, since, state}`` (``since`` aware UTC, ``state`` late or
    failed); None when that partition has no open late row, no cause was found, or the
    upstream dataset was deleted since. One query (none when ``partition`` is None)."""
    if partition is None:
        return None
    row = (
        LatePartition.objects.filter(
            dataset=dataset, partition_key=partition, recovered_at__isnull=True
        )
        .select_related("caused_by_dataset")
        .first()
    )
    if row is None or row.caused_by_dataset is None:
        return None
    return {
        "namespace": row.caused_by_dataset.namespace,
        "name": row.caused_by_dataset.name,
        "partition": row.caused_by_partition_key,
        "since": row.caused_by_since,
        "state": row.caused_by_state,
    }


def blast_radius(*, dataset: Dataset) -> dict:
    """The lateness ``dataset`` causes now: the open late rows whose recorded root cause
    is one of its partitions.

    Returns ``{partitions_count, datasets_count, datasets: [{namespace, name}],
    teams_count, teams: [slug]}``: the late downstream partitions, their datasets and the
    consumer teams subscribed to those datasets, each list the first ``MAX_LISTED`` by
    name. One query when nothing is caused, four otherwise."""
    caused = LatePartition.objects.filter(caused_by_dataset=dataset, recovered_at__isnull=True)
    partitions_count = caused.count()
    if partitions_count == 0:
        return {
            "partitions_count": 0,
            "datasets_count": 0,
            "datasets": [],
            "teams_count": 0,
            "teams": [],
        }
    downstream = Dataset.objects.filter(pk__in=caused.values("dataset_id")).order_by(
        "namespace", "name"
    )
    teams = Team.objects.filter(subscriptions__dataset__in=downstream.values("pk")).distinct()
    return {
        "partitions_count": partitions_count,
        "datasets_count": downstream.count(),
        "datasets": [
            {"namespace": namespace, "name": name}
            for namespace, name in downstream.values_list("namespace", "name")[:MAX_LISTED]
        ],
        "teams_count": teams.count(),
        "teams": list(teams.order_by("slug").values_list("slug", flat=True)[:MAX_LISTED]),
    }
