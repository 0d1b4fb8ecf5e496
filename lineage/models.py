"""What lineage keeps: OpenLineage events as received (each one also the work item a
lineage worker claims), the runs they describe, and which usage edges each run reported."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from catalog.models import ApiKey, DatasetUsage, Job, Team

from . import runstate


class LineageEvent(models.Model):
    """One OpenLineage event (spec 2-0-2) as a team's key sent it: raw, and to process.

    The same event sent twice by one team is kept once (``fingerprint``). ``verified``:
    when it arrived, the sending team claimed its job namespace (job and run events only).
    Processing is an outbox: pending rows are claimed under a lease (``claimed_until``,
    ``claim_token``) with ``FOR UPDATE SKIP LOCKED``; a lost doorbell only delays them
    until the beat sweep.
    """

    class Kind(models.TextChoices):
        RUN = "run"
        JOB = "job"
        DATASET = "dataset"

    class State(models.TextChoices):
        PENDING = "pending"
        PROCESSED = "processed"
        FAILED = "failed", "failed (attempts exhausted)"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="lineage_events")
    api_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # db_default: the INSERT returns it, so receiving reads back the EXISTS it was given.
    verified = models.BooleanField(default=False, db_default=False)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    event_type = models.CharField(max_length=16, blank=True, help_text="Empty: none given.")
    event_time = models.DateTimeField(help_text="The event's eventTime, UTC.")
    event_time_assumed_utc = models.BooleanField(
        default=False, help_text="eventTime had no offset and was read as UTC."
    )
    run_id = models.UUIDField(null=True, blank=True)
    job_namespace = models.CharField(max_length=255, blank=True)
    job_name = models.CharField(max_length=1024, blank=True)
    payload = models.JSONField(help_text="The event as received, facets and all.")
    problems = models.JSONField(
        default=list, blank=True, help_text="Flagged and unused parts: [{field, rule, detail}]."
    )
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON.")
    content_encoding = models.CharField(max_length=16, blank=True)
    body_bytes = models.PositiveIntegerField(default=0, help_text="Size as received.")
    received_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "fingerprint"], name="uniq_lineage_event"),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="lineage_event_due",
                condition=Q(state="pending"),
            ),
            models.Index(fields=["run_id", "event_time"], name="lineage_event_run"),
        ]

    def __str__(self) -> str:
        what = self.event_type or self.kind
        return f"{what} {self.job_namespace}/{self.job_name} @ {self.event_time} ({self.state})"


class LineageRun(models.Model):
    """One run of a job, from its events (``lineage.runstate`` folds them).

    A run belongs to one job and is made of its events only (``lineage.runstate.judge``):
    ``verified`` once a verified event of the job was applied, and from then on only
    verified events of the job count; a verified event reaching a run that unverified
    events made takes it over (job, team, state, times and edges start again from it).
    Other events are conflicts (``catalog.RunConflict``), never merged. ``team``: the team
    whose event made (or took over) the run. The parent is the first one given.
    ``started_at`` / ``ended_at`` come from the START and terminal events' ``eventTime``
    (None when not seen).
    """

    class State(models.TextChoices):
        NEW = runstate.NEW, "new (no START or end seen)"
        RUNNING = runstate.RUNNING
        COMPLETE = runstate.COMPLETE
        FAIL = runstate.FAIL
        ABORT = runstate.ABORT

    run_id = models.UUIDField(unique=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="runs")
    team = models.ForeignKey(
        Team,
        on_delete=models.CASCADE,
        related_name="lineage_runs",
        help_text="The team whose events the run is made of.",
    )
    verified = models.BooleanField(
        default=False, help_text="Made of verified events of its job (they took it over)."
    )
    parent_run_id = models.UUIDField(null=True, blank=True)
    parent_job_namespace = models.CharField(max_length=255, blank=True)
    parent_job_name = models.CharField(max_length=1024, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.NEW)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["job", "-id"], name="lineage_run_job")]

    def __str__(self) -> str:
        return f"{self.job} run {self.run_id} ({self.state})"

    def reporter(self) -> runstate.Reporter:
        """Whose events the run is made of, for ``runstate.judge``."""
        return runstate.Reporter(job_id=self.job_id, team_id=self.team_id, verified=self.verified)

    def facts(self) -> runstate.RunFacts:
        """The run's state and times as ``runstate.RunFacts``."""
        return runstate.RunFacts(
            state=self.state,
            started_at=self.started_at,
            ended_at=self.ended_at,
            last_event_at=self.last_event_at,
        )


class LineageRunEdge(models.Model):
    """That ``run`` reported ``usage``: inserted once per (run, usage), so each run counts
    once in the usage's ``run_count`` however many of its events name the dataset."""

    run = models.ForeignKey(LineageRun, on_delete=models.CASCADE, related_name="edges")
    usage = models.ForeignKey(DatasetUsage, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "usage"], name="uniq_run_edge"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} -> {self.usage_id}"


class CollectorCursor(models.Model):
    """Where a lineage collector (``lineage.collectors``, one per entry of the
    ``TIDEMARK_LINEAGE_COLLECTORS`` setting) stopped: the state its next run starts from,
    stored in the transaction that records what the run observed, so a run that fails
    records nothing and the next one reads the same history again. Never credentials."""

    name = models.CharField(max_length=100, unique=True)
    state = models.JSONField(default=dict, blank=True, help_text="The collector's cursor.")
    runs = models.PositiveIntegerField(default=0)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"collector {self.name} ({self.runs} runs)"
