"""What a dataset publishes: partitions, their revisions, restatements that stage new
revisions of a range, the readiness events that record each arrival, and the late
incidents of partitions that missed their deadline."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .datasets import Dataset
from .teams import ApiKey, Team

# Characters of a marker's ETag kept as the baseline (and compared, so a longer ETag is
# not a rewrite at every pass).
MARKER_ETAG_KEPT = 128


class Partition(models.Model):
    """One logical period (or slice) of a dataset; readers see its current revision."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="partitions")
    key = models.CharField(max_length=32)
    start_at = models.DateTimeField(null=True, blank=True, help_text="Logical start, UTC.")
    end_at = models.DateTimeField(null=True, blank=True, help_text="Logical end, UTC, exclusive.")
    current_revision = models.OneToOneField(
        "PartitionRevision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="current_of",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="uniq_partition_key"),
        ]
        indexes = [models.Index(fields=["dataset", "-start_at"], name="partition_newest")]

    def __str__(self) -> str:
        return f"{self.dataset}@{self.key or '-'}"


class Restatement(models.Model):
    """A new version of a range of a dataset's partitions, published as a batch.

    While ``staged`` its revisions are ready but not current: readers keep seeing the
    current revisions. Promotion repoints every partition of the range at once; an
    abandoned restatement changes nothing readers see.
    """

    class State(models.TextChoices):
        STAGED = "staged"
        PROMOTED = "promoted"
        ABANDONED = "abandoned"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="restatements")
    version = models.CharField(max_length=128)
    first_partition = models.CharField(max_length=32, help_text="First key of the range.")
    last_partition = models.CharField(max_length=32, help_text="Last key, inclusive.")
    partition_keys = models.JSONField(default=list, help_text="Every key of the range, in order.")
    code_version = models.CharField(max_length=128, blank=True)
    reason = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.STAGED)
    opened_by = models.CharField(max_length=200)
    opened_at = models.DateTimeField()
    closed_by = models.CharField(max_length=200, blank=True)
    closed_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was promoted or abandoned."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "version"], name="uniq_restatement_version"),
            models.CheckConstraint(
                condition=Q(state="staged", closed_at__isnull=True)
                | (~Q(state="staged") & Q(closed_at__isnull=False)),
                name="restatement_closed_has_closed_at",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset} {self.version} [{self.first_partition}..{self.last_partition}]"

    def covers(self, key: str) -> bool:
        """Whether partition ``key`` is inside the range (exact keys, not string order)."""
        return key in self.partition_keys


class PartitionRevisionQuerySet(models.QuerySet):
    def first_arrivals(self, *fields: str) -> models.QuerySet:
        """Per partition among these revisions, ``(*fields, first_ready_at)`` rows: when a
        revision of it was first ready, counting what arrival profiles count (published
        or found by the poll, outside restatements). ``fields`` are revision lookups such
        as ``"partition__end_at"``; filter the partitions before calling. One query,
        grouped by partition, unordered."""
        return (
            self.filter(
                state=PartitionRevision.State.READY,
                restatement__isnull=True,
                detected_by__in=[
                    PartitionRevision.DetectedBy.EVENT,
                    PartitionRevision.DetectedBy.POLL,
                ],
            )
            .values("partition_id", *fields)
            .annotate(first_ready_at=models.Min("ready_at"))
            .values_list(*fields, "first_ready_at")
            .order_by()
        )


class PartitionRevision(models.Model):
    """One version of a partition's content. ``version`` is the producer's label;
    ``""`` is the revision published without one. A revision staged in a restatement
    (``restatement`` set) becomes current only when the restatement is promoted."""

    class State(models.TextChoices):
        PENDING = "pending"
        READY = "ready"
        FAILED = "failed"

    class DetectedBy(models.TextChoices):
        EVENT = "event"
        POLL = "poll"
        LINEAGE = "lineage"

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="revisions")
    version = models.CharField(max_length=128, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    manifest = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    code_version = models.CharField(max_length=128, blank=True)
    detected_by = models.CharField(
        max_length=16, choices=DetectedBy.choices, default=DetectedBy.EVENT
    )
    ready_at = models.DateTimeField(null=True, blank=True)
    restatement = models.ForeignKey(
        Restatement, null=True, blank=True, on_delete=models.PROTECT, related_name="revisions"
    )
    # The success marker or manifest as the fallback poll last saw it under this revision
    # (catalog.rewritten_markers): a new ETag or time there is a restatement.
    marker_etag = models.CharField(
        max_length=MARKER_ETAG_KEPT,
        blank=True,
        default="",
        db_default="",
        help_text="ETag of the marker or manifest the poll saw for this revision.",
    )
    marker_modified_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Modification time of the marker or manifest the poll saw for this revision.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PartitionRevisionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["partition", "version"], name="uniq_revision_version"),
            models.CheckConstraint(
                condition=~Q(state="ready") | Q(ready_at__isnull=False),
                name="revision_ready_has_ready_at",
            ),
        ]
        indexes = [models.Index(fields=["state"], name="revision_state")]

    def __str__(self) -> str:
        return f"{self.partition}#{self.version or '-'} ({self.state})"


class LatePartition(models.Model):
    """A partition that missed its deadline plus grace: opened once, told once as
    ``dataset.late``, closed once as ``dataset.recovered`` when it lands."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="late_partitions")
    partition_key = models.CharField(max_length=32)
    deadline_at = models.DateTimeField()
    late_at = models.DateTimeField(help_text="Deadline plus grace.")
    recovered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class CauseState(models.TextChoices):
        LATE = "late"
        FAILED = "failed"

    # The root cause found when it was opened (``catalog.root_causes``): the upstream
    # partition furthest up verified lineage that was late or failed for the period this
    # one needs. Empty when none was; kept as found (a later change upstream does not
    # rewrite what was told).
    caused_by_dataset = models.ForeignKey(
        Dataset,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="caused_late_partitions",
    )
    caused_by_partition_key = models.CharField(max_length=32, blank=True)
    caused_by_since = models.DateTimeField(null=True, blank=True)
    caused_by_state = models.CharField(max_length=8, choices=CauseState.choices, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "partition_key"], name="uniq_late_partition"
            ),
            models.CheckConstraint(
                # The dataset may be deleted later (SET_NULL): what was found stays.
                condition=Q(caused_by_state="")
                | Q(caused_by_since__isnull=False, caused_by_state__in=["late", "failed"]),
                name="late_partition_cause_complete",
            ),
        ]
        indexes = [
            models.Index(
                fields=["dataset"],
                name="late_partition_open",
                condition=Q(recovered_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset} {self.partition_key} late since {self.late_at}"


class ReadinessEvent(models.Model):
    """Immutable log of one change of a revision's state, as sent by a producer or found by
    the poll. At most one per (revision, state): repeats of a publish add nothing."""

    class Source(models.TextChoices):
        API = "api"
        POLL = "poll"
        LINEAGE = "lineage"  # an OpenLineage run event as the completion signal

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="events")
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="events")
    revision = models.ForeignKey(PartitionRevision, on_delete=models.CASCADE, related_name="events")
    state = models.CharField(max_length=16, choices=PartitionRevision.State.choices)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    published_by = models.ForeignKey(Team, null=True, on_delete=models.SET_NULL, related_name="+")
    api_key = models.ForeignKey(ApiKey, null=True, on_delete=models.SET_NULL, related_name="+")
    # None: not a restatement; "" : it replaced the unversioned revision.
    restated_version = models.CharField(  # noqa: DJ001
        max_length=128, null=True, blank=True, help_text="The version this one replaced."
    )
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["revision", "state"], name="uniq_event_per_state"),
        ]

    def __str__(self) -> str:
        return f"{self.partition} -> {self.state}"
