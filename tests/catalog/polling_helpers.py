"""What the fallback-poll tests share: a dataset polled in source ``lake`` and a sweep."""

from __future__ import annotations

from datetime import UTC, datetime

from catalog import polling
from catalog.actors import Actor
from catalog.models import Dataset
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
