"""What Tidemark knows: teams, keys, datasets, partitions and their revisions, readiness
events, subscriptions, endpoints, notifications and their deliveries (the outbox), change
notices and their acknowledgements, claims, jobs and their observed usage of datasets (fed
by lineage).

One module per concern; every model is imported here, because Django finds an app's
models in its ``models`` module and callers import them from ``catalog.models``:

- ``teams``: Team, Membership, ApiKey, Claim
- ``datasets``: Dataset, DatasetAlias, DatasetTransfer
- ``partitions``: Partition, PartitionRevision, Restatement, LatePartition, ReadinessEvent
- ``delivery``: Endpoint, Subscription, SubscriptionEndpoint, Notification, Delivery,
  DeliveryAttempt, EndpointSuccessHour, IdempotencyRecord
- ``governance``: AuditEntry, ChangeNotice, ChangeNoticeAcknowledgement,
  SchemaObservation, SchemaChange
- ``storage``: StorageGroup, StorageSweep
- ``usage``: Job, DatasetUsage, UnclaimedUsage, RunConflict
"""

from .datasets import (
    Dataset,
    DatasetAlias,
    DatasetTransfer,
    _badge_token,  # noqa: F401 - migration 0006 names catalog.models._badge_token
)
from .delivery import (
    Delivery,
    DeliveryAttempt,
    Endpoint,
    EndpointSuccessHour,
    IdempotencyRecord,
    Notification,
    Subscription,
    SubscriptionEndpoint,
)
from .governance import (
    AuditEntry,
    ChangeNotice,
    ChangeNoticeAcknowledgement,
    SchemaChange,
    SchemaObservation,
)
from .partitions import LatePartition, Partition, PartitionRevision, ReadinessEvent, Restatement
from .storage import StorageGroup, StorageSweep
from .teams import ApiKey, Claim, Membership, Team
from .usage import DatasetUsage, Job, RunConflict, StaticLineage, UnclaimedUsage

__all__ = [
    "ApiKey",
    "AuditEntry",
    "ChangeNotice",
    "ChangeNoticeAcknowledgement",
    "Claim",
    "Dataset",
    "DatasetAlias",
    "DatasetTransfer",
    "DatasetUsage",
    "Delivery",
    "DeliveryAttempt",
    "Endpoint",
    "EndpointSuccessHour",
    "IdempotencyRecord",
    "Job",
    "LatePartition",
    "Membership",
    "Notification",
    "Partition",
    "PartitionRevision",
    "ReadinessEvent",
    "Restatement",
    "RunConflict",
    "SchemaChange",
    "SchemaObservation",
    "StaticLineage",
    "StorageGroup",
    "StorageSweep",
    "Subscription",
    "SubscriptionEndpoint",
    "Team",
    "UnclaimedUsage",
]
