"""Verified lineage between datasets, written directly: a job that reads one dataset and
writes another, as processed OpenLineage events leave it (``Job`` and ``DatasetUsage``)."""

from __future__ import annotations

from datetime import datetime

from catalog.models import Dataset, DatasetUsage, Job, Team


def job_between(
    owner: Team,
    name: str,
    source: Dataset,
    target: Dataset,
    *,
    seen_at: datetime,
    runs: int = 1,
) -> Job:
    """A job of ``owner`` (namespace ``airflow://orders``) reading ``source`` and writing
    ``target``, both verified, seen first and last at ``seen_at`` over ``runs`` runs."""
    job = Job.objects.create(
        namespace="airflow://orders",
        name=name,
        team=owner,
        first_seen_at=seen_at,
        last_seen_at=seen_at,
    )
    for dataset, direction in ((source, "read"), (target, "write")):
        DatasetUsage.objects.create(
            job=job,
            dataset=dataset,
            dataset_namespace=dataset.namespace,
            dataset_name=dataset.name,
            direction=direction,
            team=owner,
            verified=True,
            first_seen_at=seen_at,
            last_seen_at=seen_at,
            run_count=runs,
        )
    return job
