"""What a publish reads of its dataset (its ``target``): the dataset row, and on
PostgreSQL whether the partition exists, the dataset's subscribers and the target's
version, in one raw statement; and the per-process cache of the last target read of each
dataset, which the one-statement publish acts on after checking its version."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import connection

from .. import notices
from ..models import Dataset

# What publishing reads of a dataset: wide rows cost more to build than to fetch.
_PUBLISH_DATASET_FIELDS = (
    "id",
    "namespace",
    "name",
    "owner_id",
    "lifecycle",
    "partitioning",
    "partition_timezone",
    "criticality",
    "sla_cron",
    "accepts_future_partitions",
)
_PUBLISH_DATASET_COLUMNS = [
    f.attname for f in Dataset._meta.concrete_fields if f.attname in _PUBLISH_DATASET_FIELDS
]
_PUBLISH_DATASET_SQL = (
    f"SELECT {', '.join(_PUBLISH_DATASET_COLUMNS)} FROM {Dataset._meta.db_table} "  # noqa: S608
    "WHERE namespace = %s AND name = %s"
)
# PostgreSQL: the same row also says whether the partition exists and, for a publish that
# creates it (``one_statement._create_partition_with_revision``), brings the dataset's
# subscribers, as JSON ``notices.Subscriber`` rows, and the target's version: a hash of
# both, which ``one_statement._CREATE_PARTITION_SQL`` computes again to write only when it
# still holds.
# Every endpoint of every subscription counts (``notices.subscriber_rows_sql``), so adding
# one to a subscription changes the version as a new subscription does.
TARGET_FROM = f"""FROM catalog_dataset, LATERAL (
    SELECT coalesce(json_agg(
        json_build_array(endpoint_id, event_types, partition_pattern, newest_only)
        ORDER BY subscription_id, endpoint_id
    ), '[]')::text AS rows
    FROM ({notices.subscriber_rows_sql("catalog_dataset.id")}) AS subscriber
) AS subscribers"""  # noqa: S608 - constant fragments, no input
TARGET_VERSION = (
    f"md5(row({', '.join(f'catalog_dataset.{c}' for c in _PUBLISH_DATASET_COLUMNS)}, "
    "subscribers.rows)::text)"
)
_PUBLISH_DATASET_PG_SQL = (
    f"SELECT {', '.join(f'catalog_dataset.{c}' for c in _PUBLISH_DATASET_COLUMNS)}, "  # noqa: S608
    "EXISTS (SELECT 1 FROM catalog_partition "
    "WHERE dataset_id = catalog_dataset.id AND key = %s), "
    f"subscribers.rows, {TARGET_VERSION} {TARGET_FROM} "
    "WHERE catalog_dataset.namespace = %s AND catalog_dataset.name = %s"
)


@dataclass(frozen=True)
class PublishTarget:
    """What ``publish_target`` reads: the dataset (None: not registered) and, on
    PostgreSQL, whether the partition exists, the dataset's subscribers (else None) and
    the target's version (``TARGET_VERSION``)."""

    dataset: Dataset | None
    partition_exists: bool | None = None
    subscribers: list[notices.Subscriber] | None = None
    version: str | None = None


# The last target read of each dataset, per process, by (namespace, name): ``(dataset
# row, subscribers, version)``; the least recently read is forgotten first. A publish may
# act on it without reading it again, since the statement that writes checks the version
# first (and writes nothing if it changed).
PUBLISH_TARGETS_KEPT = 1024
_publish_targets: dict[tuple[str, str], tuple[tuple, list, str]] = {}


def publish_target(namespace: str, name: str, key: str) -> PublishTarget:
    """The dataset with this (normalised) identity, only ``_PUBLISH_DATASET_FIELDS``
    loaded (the rest deferred), and where ``writes_in_one_statement()`` whether the
    partition ``key`` exists, the dataset's subscribers and the target's version, in one
    statement (kept for ``kept_publish_target``).

    Raw SQL: every publish runs it, and compiling the ORM query cost more than running it.
    """
    on_pg = writes_in_one_statement()
    with connection.cursor() as cursor:
        if on_pg:
            cursor.execute(_PUBLISH_DATASET_PG_SQL, [key, namespace, name])
        else:
            cursor.execute(_PUBLISH_DATASET_SQL, [namespace, name])
        row = cursor.fetchone()
    if row is None:
        _publish_targets.pop((namespace, name), None)
        return PublishTarget(None)
    columns = len(_PUBLISH_DATASET_COLUMNS)
    dataset = Dataset.from_db(connection.alias, _PUBLISH_DATASET_COLUMNS, row[:columns])
    if not on_pg:
        return PublishTarget(dataset)
    subscribers, version = json.loads(row[columns + 1]), row[columns + 2]
    if _publish_targets.pop((namespace, name), None) is None:
        while len(_publish_targets) >= PUBLISH_TARGETS_KEPT:
            _publish_targets.pop(next(iter(_publish_targets)), None)  # read longest ago
    _publish_targets[namespace, name] = (row[:columns], subscribers, version)
    return PublishTarget(dataset, row[columns], subscribers, version)


def kept_publish_target(namespace: str, name: str) -> PublishTarget | None:
    """The target last read of this dataset by this process, as if its partition were
    missing, or None; not to be trusted before a statement checks its version."""
    kept = _publish_targets.get((namespace, name))
    if kept is None:
        return None
    row, subscribers, version = kept
    dataset = Dataset.from_db(connection.alias, _PUBLISH_DATASET_COLUMNS, row)
    return PublishTarget(dataset, False, subscribers, version)


def writes_in_one_statement() -> bool:
    """Whether a new revision and what it owes are written in one statement: on
    PostgreSQL (data-modifying ``WITH``); SQLite writes them one by one."""
    return connection.vendor == "postgresql"
