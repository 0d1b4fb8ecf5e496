"""Shapes of the catalog API: input serializers validate types, output ones render.

One module per part of the API; everything public is importable from here, as
``from api.serializers import catalog as s`` and the other serializer modules expect.
"""

from __future__ import annotations

from .base import (
    FieldsOncePerThread,
    StrictSerializer,
)
from .change_notices import (
    ChangeNoticeAcknowledgementOutputSerializer,
    ChangeNoticeCreateInputSerializer,
    ChangeNoticeOutputSerializer,
)
from .datasets import (
    AuditEntryOutputSerializer,
    CatalogApplyQuerySerializer,
    CatalogPlanOutputSerializer,
    DatasetCreateInputSerializer,
    DatasetDetailOutputSerializer,
    DatasetListFilterSerializer,
    DatasetOutputSerializer,
    DatasetUpdateInputSerializer,
    DeadlineOutputSerializer,
    DeclaredDatasetOutputSerializer,
    FieldChangeOutputSerializer,
    FieldWarningOutputSerializer,
    NeededByOutputSerializer,
)
from .deliveries import (
    DeliveryAttemptOutputSerializer,
    DeliveryDetailOutputSerializer,
    DeliveryListFilterSerializer,
    DeliveryOutputSerializer,
    EndpointOutputSerializer,
    ReplayOutputSerializer,
    SecretOutputSerializer,
)
from .freshness import (
    ArrivalProfileOutputSerializer,
    ArrivalQuantilesOutputSerializer,
    ArrivalWeekdaysOutputSerializer,
    BlastRadiusDatasetOutputSerializer,
    BlastRadiusOutputSerializer,
    CausedByOutputSerializer,
    ForecastDatasetOutputSerializer,
    ForecastOutputSerializer,
    ForecastUpstreamOutputSerializer,
    FreshnessOutputSerializer,
    SlaSuggestionOutputSerializer,
)
from .keys import (
    ApiKeyCreatedOutputSerializer,
    ApiKeyCreateInputSerializer,
    ApiKeyOutputSerializer,
    MeOutputSerializer,
    TeamRefOutputSerializer,
)
from .partitions import (
    ManifestSerializer,
    PartitionListFilterSerializer,
    PartitionOutputSerializer,
    PollOutputSerializer,
    ReadinessPublishInputSerializer,
    ReadinessPublishOutputSerializer,
    RevisionOutputSerializer,
    StorageSweepOutputSerializer,
)
from .restatements import (
    RestatementOpenInputSerializer,
    RestatementOutputSerializer,
    RestatementPartitionOutputSerializer,
)
from .subscriptions import (
    EVENT_TYPES_HELP,
    NEED_BY_CRON_HELP,
    NEED_BY_TIMEZONE_HELP,
    NEWEST_ONLY_HELP,
    SubscriptionCreateInputSerializer,
    SubscriptionOutputSerializer,
    SubscriptionUpdateInputSerializer,
    WarningOutputSerializer,
)

__all__ = [
    "EVENT_TYPES_HELP",
    "NEED_BY_CRON_HELP",
    "NEED_BY_TIMEZONE_HELP",
    "NEWEST_ONLY_HELP",
    "ApiKeyCreateInputSerializer",
    "ApiKeyCreatedOutputSerializer",
    "ApiKeyOutputSerializer",
    "ArrivalProfileOutputSerializer",
    "ArrivalQuantilesOutputSerializer",
    "ArrivalWeekdaysOutputSerializer",
    "AuditEntryOutputSerializer",
    "BlastRadiusDatasetOutputSerializer",
    "BlastRadiusOutputSerializer",
    "CatalogApplyQuerySerializer",
    "CatalogPlanOutputSerializer",
    "CausedByOutputSerializer",
    "ChangeNoticeAcknowledgementOutputSerializer",
    "ChangeNoticeCreateInputSerializer",
    "ChangeNoticeOutputSerializer",
    "DatasetCreateInputSerializer",
    "DatasetDetailOutputSerializer",
    "DatasetListFilterSerializer",
    "DatasetOutputSerializer",
    "DatasetUpdateInputSerializer",
    "DeadlineOutputSerializer",
    "DeclaredDatasetOutputSerializer",
    "DeliveryAttemptOutputSerializer",
    "DeliveryDetailOutputSerializer",
    "DeliveryListFilterSerializer",
    "DeliveryOutputSerializer",
    "EndpointOutputSerializer",
    "FieldChangeOutputSerializer",
    "FieldWarningOutputSerializer",
    "FieldsOncePerThread",
    "ForecastDatasetOutputSerializer",
    "ForecastOutputSerializer",
    "ForecastUpstreamOutputSerializer",
    "FreshnessOutputSerializer",
    "ManifestSerializer",
    "MeOutputSerializer",
    "NeededByOutputSerializer",
    "PartitionListFilterSerializer",
    "PartitionOutputSerializer",
    "PollOutputSerializer",
    "ReadinessPublishInputSerializer",
    "ReadinessPublishOutputSerializer",
    "ReplayOutputSerializer",
    "RestatementOpenInputSerializer",
    "RestatementOutputSerializer",
    "RestatementPartitionOutputSerializer",
    "RevisionOutputSerializer",
    "SecretOutputSerializer",
    "SlaSuggestionOutputSerializer",
    "StorageSweepOutputSerializer",
    "StrictSerializer",
    "SubscriptionCreateInputSerializer",
    "SubscriptionOutputSerializer",
    "SubscriptionUpdateInputSerializer",
    "TeamRefOutputSerializer",
    "WarningOutputSerializer",
]
