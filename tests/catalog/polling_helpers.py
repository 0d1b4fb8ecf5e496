"""What the fallback-poll tests share: a dataset polled in source ``lake``, a sweep, and
partitions recorded ready in bulk (the history a dataset already has)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta

from catalog import polling
from catalog.actors import Actor
from catalog.models import Dataset, Partition, PartitionRevision
from catalog.services import datasets

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def register(team, name="orders", **fields) -> Dataset:
    """A success-marker dataset at ``sales/<name>/dt={partition}/`` in source ``lake``."""
    fields.setdefault("completion_signal", Dataset.CompletionSignal.SUCCESS_MARKER)
    fields.setdefault("storage_source", "lake")
    fields.setdefault("location_template", f"sales/{name}/dt={{partition}}/")
    return datasets.dataset_register(
        actor=Actor(team=team), namespace="s3://lake", name=name, **fields
    )


def sweep(dataset, *, now=NOW, full=False):
    """Sweep the dataset's storage group now."""
    dataset.refresh_from_db()
    return polling.sweep_group(dataset.poll_group, now=now, full=full)


def record_ready(
    dataset,
    days: Iterable[date],
    *,
    detected_by: str = PartitionRevision.DetectedBy.EVENT,
) -> None:
    """Record ``days`` of daily ``dataset`` ready in bulk, as ``detected_by`` found them
    (history a producer published, or an earlier poll found)."""
    partitions = Partition.objects.bulk_create(
        Partition(
            dataset=dataset,
            key=day.isoformat(),
            start_at=datetime.combine(day, time(), UTC),
            end_at=datetime.combine(day + timedelta(days=1), time(), UTC),
        )
        for day in days
    )
    revisions = PartitionRevision.objects.bulk_create(
        PartitionRevision(
            partition=partition,
            state=PartitionRevision.State.READY,
            ready_at=partition.end_at,
            detected_by=detected_by,
        )
        for partition in partitions
    )
    for partition, revision in zip(partitions, revisions, strict=True):
        partition.current_revision = revision
    Partition.objects.bulk_update(partitions, ["current_revision"], batch_size=500)


def ready_keys(dataset, *, besides: Iterable[date] = ()) -> set[str]:
    """The keys of ``dataset``'s ready partitions, but for the days ``besides``."""
    return set(
        Partition.objects.filter(
            dataset=dataset, current_revision__state=PartitionRevision.State.READY
        )
        .exclude(key__in=[day.isoformat() for day in besides])
        .values_list("key", flat=True)
    )


def stored_history(
    s3, team, templates: dict[str, str], *, oldest: date, newest: dict[str, date]
) -> dict[str, Dataset]:
    """Success-marker datasets ``{name: location template}`` of one storage group, each
    with every day from ``oldest`` to ``newest[name]`` (inclusive) stored as a
    ``_SUCCESS`` marker in ``s3`` and recorded ready."""
    out = {}
    for name, template in templates.items():
        dataset = register(team, name, location_template=template)
        days = [oldest + timedelta(days=i) for i in range((newest[name] - oldest).days + 1)]
        s3.put_many([template.format(partition=d.isoformat()) + "_SUCCESS" for d in days])
        record_ready(dataset, days)
        out[name] = dataset
    assert len({d.poll_group_id for d in out.values()}) == 1
    return out
