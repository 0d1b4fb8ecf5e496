"""Who uses which dataset, as lineage reports it: jobs, their observed reads and writes of
datasets, what a database role accessed while no team claimed it, and the lineage events
that named a run they do not belong to."""

from __future__ import annotations

from django.db import models

from .datasets import Dataset
from .teams import Team


class Job(models.Model):
    """A job seen in runtime lineage, by its OpenLineage ``namespace`` + ``name`` (kept as
    received: job identities are not normalised). ``team`` is its verified owner: the team
    that claimed the job namespace, set by the last verified event; None while only
    unverified events named the job."""

    namespace = models.CharField(max_length=255)
    name = models.CharField(max_length=1024)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    first_seen_at = models.DateTimeField(help_text="Earliest event time seen (UTC).")
    last_seen_at = models.DateTimeField(help_text="Latest event time seen (UTC).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="uniq_job_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class DatasetUsage(models.Model):
    """An observed edge: ``job`` read or wrote the dataset with this normalised identity,
    as reported by ``team``'s keys, aggregated over all runs.

    ``verified``: the reporting team claims the job's namespace; unverified edges are kept
    apart (their own rows) and never count as declarations. ``dataset`` links the catalog's
    row when one is registered with this identity (usage of unknown datasets is still
    recorded, by identity). Usage of a symlink alias of a catalog dataset is recorded under
    the dataset's identity (``catalog.services.aliases``). ``run_count`` counts each run
    once.
    """

    class Direction(models.TextChoices):
        READ = "read"
        WRITE = "write"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="usages")
    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="usages"
    )
    dataset_namespace = models.CharField(max_length=255)
    dataset_name = models.CharField(max_length=1024)
    direction = models.CharField(max_length=8, choices=Direction.choices)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usages")
    verified = models.BooleanField(default=False)
    first_seen_at = models.DateTimeField(help_text="Earliest event time seen (UTC).")
    last_seen_at = models.DateTimeField(help_text="Latest event time seen (UTC).")
    run_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "job",
                    "dataset_namespace",
                    "dataset_name",
                    "direction",
                    "team",
                    "verified",
                ],
                name="uniq_dataset_usage",
            ),
        ]
        indexes = [
            models.Index(fields=["dataset_namespace", "dataset_name"], name="usage_identity"),
            models.Index(fields=["team", "direction", "verified"], name="usage_team"),
        ]

    def __str__(self) -> str:
        verified = "" if self.verified else " (unverified)"
        return (
            f"{self.job} {self.direction}s {self.dataset_namespace}/{self.dataset_name}"
            f" for {self.team_id}{verified}"
        )


class UnclaimedUsage(models.Model):
    """What a lineage collector saw a database role read or write while no team claimed
    the role (``Claim`` kind ``db_role``, ``pattern``): kept, attributed to no team, so
    that when a team claims the role it becomes that team's verified usage
    (``catalog.services.usage.held_usage_attribute``) without collecting the history again.
    ``access_count`` adds up the accesses (they become the usage's ``run_count``)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="unclaimed_usages")
    pattern = models.CharField(max_length=255, help_text="The db_role claim pattern it awaits.")
    dataset_namespace = models.CharField(max_length=255)
    dataset_name = models.CharField(max_length=1024)
    direction = models.CharField(max_length=8, choices=DatasetUsage.Direction.choices)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    access_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["job", "dataset_namespace", "dataset_name", "direction"],
                name="uniq_unclaimed_usage",
            ),
        ]
        indexes = [models.Index(fields=["pattern"], name="unclaimed_usage_pattern")]

    def __str__(self) -> str:
        return (
            f"{self.job} {self.direction}s {self.dataset_namespace}/{self.dataset_name} (unclaimed)"
        )


class RunConflict(models.Model):
    """A lineage event that named a run it does not belong to (``lineage.runstate.judge``):
    an unverified event for a run verified events made, an event naming another job than
    the run's, or another team's unverified report. The event is kept by lineage (its id
    is ``event_id``) and never merged into the run; this row shows it to governance.

    ``run_*`` say whose the run is: its job, the team that reported it and whether that
    was verified (updated when verified events take over a run unverified ones made, and
    ``reason`` with it). One row per event, recorded by lineage processing.
    """

    class Reason(models.TextChoices):
        OTHER_JOB = "other_job", "names another job than the run's"
        UNVERIFIED = "unverified", "unverified, and the run's events are verified"
        OTHER_TEAM = "other_team", "another team's unverified report of the run's job"

    run_id = models.UUIDField(help_text="The OpenLineage runId both name.")
    run_job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    run_team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    run_verified = models.BooleanField()
    event_id = models.BigIntegerField(unique=True, help_text="The lineage event's id.")
    event_job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    event_team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    event_verified = models.BooleanField()
    event_type = models.CharField(max_length=16, blank=True, help_text="Empty: none given.")
    event_time = models.DateTimeField(help_text="The event's eventTime, UTC.")
    reason = models.CharField(max_length=16, choices=Reason.choices)
    detected_at = models.DateTimeField(help_text="When processing found it, UTC.")

    class Meta:
        indexes = [
            models.Index(fields=["run_id"], name="run_conflict_run"),
            models.Index(fields=["event_team", "-detected_at"], name="run_conflict_sender"),
            models.Index(fields=["run_team", "-detected_at"], name="run_conflict_owner"),
        ]

    def __str__(self) -> str:
        return f"event {self.event_id} vs run {self.run_id}: {self.reason}"


class StaticLineage(models.Model):
    """Design-time lineage, as OpenLineage JobEvents and DatasetEvents state it (no run):
    ``job`` declared that it reads (``read``) or writes (``write``) the dataset with this
    normalised identity; or, with no job and no direction, a DatasetEvent named the
    dataset. Recorded by lineage (``catalog.services.usage.static_lineage_record``): a
    job's latest JobEvent replaces the edges its earlier ones stated (verified and
    unverified statements apart, as usage keeps them). Never observed usage: it does not
    count as a read in governance reports, and is only drawn in the lineage graph."""

    class Direction(models.TextChoices):
        READ = "read"
        WRITE = "write"
        NONE = "", "none (a dataset event)"

    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.CASCADE, related_name="static_lineage"
    )
    dataset_namespace = models.CharField(max_length=255)
    dataset_name = models.CharField(max_length=1024)
    direction = models.CharField(max_length=8, choices=Direction.choices, blank=True)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    verified = models.BooleanField(default=False)
    stated_at = models.DateTimeField(help_text="Event time of the latest statement (UTC).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "static lineage"
        constraints = [
            models.UniqueConstraint(
                fields=["job", "dataset_namespace", "dataset_name", "direction", "verified"],
                condition=models.Q(job__isnull=False),
                name="uniq_static_lineage_edge",
            ),
            models.UniqueConstraint(
                fields=["dataset_namespace", "dataset_name"],
                condition=models.Q(job__isnull=True),
                name="uniq_static_lineage_dataset",
            ),
            models.CheckConstraint(
                condition=models.Q(job__isnull=True, direction="")
                | models.Q(job__isnull=False, direction__in=["read", "write"]),
                name="static_lineage_job_has_direction",
            ),
        ]
        indexes = [
            models.Index(
                fields=["dataset_namespace", "dataset_name"], name="static_lineage_identity"
            ),
        ]

    def __str__(self) -> str:
        if self.job_id is None:
            return f"dataset {self.dataset_namespace}/{self.dataset_name} (stated)"
        return f"{self.job} {self.direction}s {self.dataset_namespace}/{self.dataset_name} (stated)"
