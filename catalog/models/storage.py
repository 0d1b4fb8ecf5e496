"""The fallback poll's bookkeeping: datasets polled together under one storage prefix
(``StorageGroup``) and each sweep of such a group."""

from __future__ import annotations

from django.db import models


class StorageGroup(models.Model):
    """Datasets whose partitions live under one parent prefix of one storage source: the
    fallback poll lists the parent once per sweep, with a delimiter, for all of them.

    ``interval_seconds`` is the current gap between sweeps: adaptive groups (some dataset
    sends no readiness events) start at the minimum and back off while nothing new
    appears; groups whose datasets all publish events are swept as an hourly safety net.
    """

    class Mode(models.TextChoices):
        ADAPTIVE = "adaptive", "poll-only: adaptive"
        SAFETY_NET = "safety_net", "events: hourly safety net"

    source = models.CharField(max_length=64)
    prefix = models.CharField(max_length=1024, help_text="Parent prefix, relative to the root.")
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.ADAPTIVE)
    interval_seconds = models.PositiveIntegerField(default=60)
    next_sweep_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    last_swept_at = models.DateTimeField(
        null=True, blank=True, help_text="When the last completed sweep started."
    )
    last_full_sweep_at = models.DateTimeField(null=True, blank=True)
    last_found_at = models.DateTimeField(null=True, blank=True)
    last_recent_pass_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a sweep last re-read the markers of its recent ready partitions.",
    )
    last_wide_sweep_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the last completed sweep of every dataset of the group started.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "prefix"], name="uniq_storage_group"),
        ]
        indexes = [models.Index(fields=["next_sweep_at"], name="storage_group_due")]

    def __str__(self) -> str:
        return f"{self.source}:{self.prefix or '/'}"


class StorageSweep(models.Model):
    """One sweep of a storage group and what it cost (kept for a week).

    ``listing`` says how the group was listed: ``delimiter`` (the partition prefixes, then
    inside each one not yet ready) or ``flat`` (the objects themselves, markers and
    manifests included). ``objects_per_partition`` is what the sweep measured (objects
    listed per partition prefix seen), from which the next sweeps choose their listing.
    ``narrow`` says the sweep listed only the datasets with a partition due (its poll-only
    datasets still waiting for their latest period), not every dataset of the group.
    """

    class Listing(models.TextChoices):
        DELIMITER = "delimiter", "partition prefixes, then inside"
        FLAT = "flat", "objects, no delimiter"

    group = models.ForeignKey(StorageGroup, on_delete=models.CASCADE, related_name="sweeps")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    full = models.BooleanField(default=False, help_text="Listed every partition, no horizon.")
    listing = models.CharField(max_length=16, choices=Listing.choices, default=Listing.DELIMITER)
    objects_per_partition = models.FloatField(
        null=True, blank=True, help_text="Objects listed per partition prefix, when measured."
    )
    list_calls = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)
    objects_seen = models.PositiveIntegerField(default=0)
    partitions_checked = models.PositiveIntegerField(default=0)
    partitions_found = models.PositiveIntegerField(default=0)
    missed_events = models.PositiveIntegerField(default=0)
    incomplete = models.PositiveIntegerField(default=0)
    recent_pass = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Also re-read the markers of the recent ready partitions.",
    )
    partitions_restated = models.PositiveIntegerField(default=0, db_default=0)
    narrow = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Listed only the datasets with a partition due, not every dataset.",
    )
    datasets_listed = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Datasets whose names the sweep listed."
    )
    error = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["group", "-started_at"], name="storage_sweep_recent")]

    def __str__(self) -> str:
        return f"{self.group} @ {self.started_at}"
