"""Building what the pages show: usage, change notices, dead letters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from catalog import change_notices, success_counts
from catalog.actors import Actor
from catalog.models import Dataset, DatasetUsage, Delivery, Endpoint, Notification, Team
from catalog.services import usage as usage_services


def observe(
    team: Team,
    job: str,
    dataset: Dataset | tuple[str, str],
    direction: str = "read",
    *,
    verified: bool = True,
    runs: int = 3,
    job_namespace: str | None = None,
):
    """Record that ``team``'s job ``job`` read (or wrote) ``dataset`` ``runs`` times."""
    namespace, name = (dataset.namespace, dataset.name) if isinstance(dataset, Dataset) else dataset
    seen = datetime(2026, 11, 27, 6, tzinfo=UTC)
    job_row = usage_services.job_record(
        namespace=job_namespace or f"airflow://{team.slug}",
        name=job,
        team=team if verified else None,
        seen_at=seen,
    )
    usage = usage_services.usage_observe(
        job=job_row,
        namespace=namespace,
        name=name,
        direction=direction,
        team=team,
        verified=verified,
        seen_at=seen,
    )
    DatasetUsage.objects.filter(pk=usage.pk).update(run_count=runs)
    return usage


def announce(dataset: Dataset, *, kind: str = "breaking_schema_change", days: int = 30):
    return change_notices.change_notice_announce(
        actor=Actor(team=dataset.owner, username="owner"),
        dataset=dataset,
        kind=kind,
        description="Column amount becomes a decimal.",
        effective_at=timezone.now() + timedelta(days=days),
        now=timezone.now(),
    )


def dead_letter(
    endpoint: Endpoint, *, state: str = "dead", n: int = 0, finished_at: datetime | None = None
) -> Delivery:
    """A delivery to ``endpoint`` in ``state``; a finished one (dead, rejected,
    succeeded) finished at ``finished_at`` (default now). A succeeded one is counted in
    the endpoint's hourly success counters, as the workers count what they send."""
    notification = Notification.objects.create(
        type=Notification.Type.PARTITION_READY,
        dedup_key=f"test-{endpoint.pk}-{state}-{n}",
        payload={"type": "partition.ready", "data": {}},
    )
    finished = state in ("dead", "rejected", "succeeded")
    finished_at = (finished_at or timezone.now()) if finished else None
    delivery = Delivery.objects.create(
        notification=notification,
        endpoint=endpoint,
        state=state,
        attempts=5,
        next_attempt_at=timezone.now(),
        last_status_code=500 if state == "dead" else None,
        last_error="server error" if state == "dead" else "",
        finished_at=finished_at,
    )
    if state == "succeeded":
        success_counts.successes_add({(endpoint.pk, success_counts.hour_of(finished_at)): 1})
    return delivery
