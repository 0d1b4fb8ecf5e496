"""The watchdog's own tables, in its own database: monitors, pings, incidents, channels,
pages (the paging outbox), API tokens and its heartbeat state."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from schedules import calendars


class Channel(models.Model):
    """Where pages go. ``target`` is a PagerDuty routing key, a Slack incoming-webhook URL,
    a webhook URL or an email address, by ``kind``."""

    class Kind(models.TextChoices):
        PAGERDUTY = "pagerduty", "PagerDuty Events API v2"
        SLACK = "slack", "Slack incoming webhook"
        WEBHOOK = "webhook", "signed webhook (Standard Webhooks)"
        EMAIL = "email", "email"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    target = models.CharField(max_length=2048)
    # Standard Webhooks secret for ``webhook`` channels, Fernet-encrypted.
    secret_encrypted = models.TextField(blank=True)
    owner = models.CharField(max_length=64, blank=True, help_text="Owner label (a team slug).")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class Monitor(models.Model):
    """A dead-man's switch: expects pings on a schedule and pages when one is missed.

    Two schedule kinds:

    - ``period``: a success ping every ``period_seconds``; late after ``grace_seconds``.
    - ``deadline``: by each firing of ``cron`` in ``timezone`` (+ grace). With
      ``partitioning``, the deadline expects the partition of the period that closed before
      it (as the catalog's freshness SLAs do) and only a ping carrying that partition
      satisfies it; without, any success ping since the previous deadline does. With
      ``calendar`` ``business_days``, only firings on business days are deadlines
      (``schedules.calendars``; ``non_business_day`` says what the others owed).

    ``deadline_at`` is the earliest deadline not yet judged and ``check_at`` =
    ``deadline_at`` + grace (indexed): the loop costs what is due, not what exists.
    """

    class Kind(models.TextChoices):
        PERIOD = "period"
        DEADLINE = "deadline"

    class State(models.TextChoices):
        NEW = "new"
        UP = "up"
        DOWN = "down"
        PAUSED = "paused"

    class Calendar(models.TextChoices):
        NONE = "none", "every day"
        BUSINESS_DAYS = "business_days", "business days"

    class NonBusinessDay(models.TextChoices):
        NEXT_BUSINESS_DAY = calendars.NEXT_BUSINESS_DAY, "due on the next business day"
        SKIP = calendars.SKIP, "not owed"

    class Severity(models.TextChoices):
        """PagerDuty Events API v2 ``payload.severity`` values, most urgent first."""

        CRITICAL = "critical"
        ERROR = "error"
        WARNING = "warning"
        INFO = "info"

    ping_key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200)
    owner = models.CharField(max_length=64, blank=True, help_text="Owner label (a team slug).")
    # Pinged as ``/ping/<ping key>/<slug>`` with a ping key of its owner; unique per owner.
    slug = models.CharField(max_length=100, blank=True, default="", db_default="")
    external_id = models.CharField(
        max_length=200,
        blank=True,
        help_text="The managing system's own id for this monitor (e.g. a catalog dataset).",
    )
    # The managing system's version of the definition: older upserts arriving late
    # (retries) never overwrite newer ones.
    external_version = models.CharField(max_length=64, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.PERIOD)
    period_seconds = models.PositiveIntegerField(null=True, blank=True)
    cron = models.CharField(max_length=128, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    partitioning = models.CharField(max_length=16, blank=True)
    partition_timezone = models.CharField(max_length=64, default="UTC")
    grace_seconds = models.PositiveIntegerField(default=0)
    # Business days only (``schedules.calendars``, as the catalog's SLA calendars): a
    # deadline monitor's firings on other local dates in ``timezone`` are not deadlines.
    calendar = models.CharField(
        max_length=16, choices=Calendar.choices, default=Calendar.NONE, db_default="none"
    )
    holidays_country = models.CharField(max_length=8, blank=True, default="", db_default="")
    holidays_subdivision = models.CharField(max_length=64, blank=True, default="", db_default="")
    non_business_day = models.CharField(
        max_length=24,
        choices=NonBusinessDay.choices,
        default=NonBusinessDay.NEXT_BUSINESS_DAY,
        db_default=calendars.NEXT_BUSINESS_DAY,
    )
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    # Start lateness: a ``/start`` is expected at each scheduled start (``start_cron`` in
    # ``timezone`` for deadline monitors; one period after the previous start for period
    # monitors) and is late ``start_grace_seconds`` after it.
    start_cron = models.CharField(max_length=128, blank=True)
    start_grace_seconds = models.PositiveIntegerField(null=True, blank=True)
    # Checking the data itself at the deadline: the expected partition's marker, under an
    # operator-defined source (``WATCHDOG_STORAGE_SOURCES``) and a relative template.
    storage_source = models.CharField(max_length=64, blank=True)
    storage_template = models.CharField(max_length=512, blank=True)
    storage_marker = models.CharField(max_length=128, blank=True, default="_SUCCESS")
    post_only = models.BooleanField(default=False, help_text="Ignore GET pings (link unfurlers).")
    # How urgent its pages are (PagerDuty's severity; a catalog-fed monitor's follows its
    # dataset's criticality).
    severity = models.CharField(
        max_length=16, choices=Severity.choices, default=Severity.CRITICAL, db_default="critical"
    )
    # Pages about it link here too: ``[{"href": "https://...", "text": "..."}]`` (a catalog-
    # fed monitor: its dataset's page), http(s) only (``monitors.link_problems``).
    links = models.JSONField(
        default=list, blank=True, db_default=models.Value([], output_field=models.JSONField())
    )
    # Watches Tidemark itself (beat, workers, poll, deliveries). While one is down, pages of
    # the other monitors are held: the outage is Tidemark's, and operators are paged for it.
    system = models.BooleanField(default=False)
    # The monitors whose missed deadlines cause this one's (external ids, as the catalog
    # feeds them from verified lineage: the data monitors of the datasets its jobs read).
    # While one of them has an open incident paging for a partition this monitor's
    # missing partition needs, this monitor's trigger is held under it (``holds``).
    depends_on = models.JSONField(
        default=list, blank=True, db_default=models.Value([], output_field=models.JSONField())
    )
    channels = models.ManyToManyField(Channel, blank=True, related_name="monitors")

    state = models.CharField(max_length=16, choices=State.choices, default=State.NEW)
    deadline_at = models.DateTimeField(null=True, blank=True)
    check_at = models.DateTimeField(null=True, blank=True)
    last_ping_at = models.DateTimeField(null=True, blank=True)
    last_ping_kind = models.CharField(max_length=16, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_partition = models.CharField(max_length=32, blank=True)
    # The success ping that filled the newest deadline met (time and id): a ping fills
    # one deadline, so the next one counts only later pings (deadline monitors without
    # partitions; a partition names the one deadline it is for).
    counted_ping_at = models.DateTimeField(null=True, blank=True)
    counted_ping_id = models.BigIntegerField(null=True, blank=True)
    last_start_at = models.DateTimeField(null=True, blank=True)
    # The earliest scheduled start not yet judged, and when it is judged (+ start grace).
    start_expected_at = models.DateTimeField(null=True, blank=True)
    start_check_at = models.DateTimeField(null=True, blank=True)
    # Who paused it (an operator's username, or "API token <name>") and when; blank unless
    # paused.
    paused_by = models.CharField(max_length=150, blank=True, default="", db_default="")
    paused_at = models.DateTimeField(null=True, blank=True)
    # The pause is only the managing system's (its definition said ``active: false``):
    # its definition turning active again lifts it. A pause someone made is lifted only by
    # someone resuming the monitor.
    paused_by_definition = models.BooleanField(default=False, db_default=False)
    # Per-monitor ping rate limit, kept in this row (the watchdog uses no cache server).
    rate_window_start = models.DateTimeField(null=True, blank=True)
    rate_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["check_at"], name="monitor_due", condition=Q(check_at__isnull=False)
            ),
            models.Index(
                fields=["start_check_at"],
                name="monitor_start_due",
                condition=Q(start_check_at__isnull=False),
            ),
            models.Index(fields=["owner"], name="monitor_owner"),
            # "Is Tidemark degraded?" is asked on every claim of pages.
            models.Index(fields=["state"], name="monitor_system", condition=Q(system=True)),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["external_id"],
                name="uniq_monitor_external_id",
                condition=~Q(external_id=""),
            ),
            models.UniqueConstraint(
                fields=["owner", "slug"], name="uniq_monitor_slug", condition=~Q(slug="")
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Ping(models.Model):
    """One ping as received. Bodies are truncated to ``WATCHDOG_PING_BODY_LIMIT`` bytes and
    decoded leniently. A ``log`` ping is only recorded: it changes nothing of its monitor
    (but its rate count)."""

    class Kind(models.TextChoices):
        SUCCESS = "success"
        START = "start"
        FAIL = "fail"
        LOG = "log"

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="pings")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    exit_status = models.PositiveSmallIntegerField(null=True, blank=True)
    partition = models.CharField(max_length=32, blank=True)
    run_id = models.CharField(max_length=64, blank=True)
    received_at = models.DateTimeField()
    method = models.CharField(max_length=8)
    remote_addr = models.CharField(max_length=64, blank=True)
    user_agent = models.CharField(max_length=200, blank=True)
    body = models.TextField(blank=True)
    duration_ms = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="From the paired start (same run id) to this ping."
    )

    class Meta:
        indexes = [
            models.Index(fields=["monitor", "-received_at"], name="ping_recent"),
            models.Index(
                fields=["monitor", "partition"],
                name="ping_partition",
                condition=Q(kind="success") & ~Q(partition=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} ping of {self.monitor_id} at {self.received_at}"


class Run(models.Model):
    """One run of a monitored job, from its ``/start`` ping to its finish. Runs are
    tracked separately by run id (``?rid=``), so a hung run is not hidden by a later one
    that finished; a run open past the monitor's ``max_runtime_seconds`` pages."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="runs")
    run_id = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, blank=True)  # success / fail
    # started_at + max runtime, while open and not yet paged: the loop's indexed query.
    overdue_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["overdue_at"], name="run_overdue", condition=Q(overdue_at__isnull=False)
            ),
            models.Index(fields=["monitor", "run_id"], name="run_by_id"),
            # A monitor's recent runs (its on-call page).
            models.Index(fields=["monitor", "-started_at"], name="run_recent"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id or '-'} of {self.monitor_id} from {self.started_at}"


class Incident(models.Model):
    """One missed deadline (or failure) of one monitor: opened once, paged once, resolved
    once. Unique per (monitor, deadline, reason), so two loops open it once.

    One cause, one page: an incident ``part_of`` another is paged through that one and
    queues no page of its own (a missed deadline of a monitor whose reported failure is
    still open; the same deadline missed by both monitors of one subject, e.g. a dataset's
    data and pipeline monitors). ``resolved_at`` says when this monitor recovered; the
    page resolves when the incident and all its parts have.
    """

    class Reason(models.TextChoices):
        MISSED = "missed", "no ping by the deadline"
        FAILED = "failed", "the job reported failure"
        RUNTIME = "runtime", "the run exceeded its maximum run time"
        START_LATE = "start_late", "the run did not start in time"

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="incidents")
    reason = models.CharField(max_length=16, choices=Reason.choices, default=Reason.MISSED)
    deadline_at = models.DateTimeField()
    partition = models.CharField(max_length=32, blank=True, help_text="The partition expected.")
    summary = models.CharField(max_length=1024)
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    part_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="parts",
        help_text="The incident that pages for this one (the same cause).",
    )
    # One late root, one page: the open incident furthest up a chain of late upstream
    # monitors that this one's trigger waits under (``holds``), set when the trigger was
    # held; kept after ``released_at`` (the chain recovered, or stopped paging, while
    # this one was still open) to say what it waited for. ``held_via`` is the direct
    # upstream's incident through which it is held (the same one when the root is a
    # direct upstream). A held incident that resolves first never pages.
    held_under = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="holding",
        help_text="The upstream incident this one's page is held under (the late root).",
    )
    held_via = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="holding_via",
        help_text="The direct upstream's incident through which the page is held.",
    )
    held_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["monitor", "deadline_at", "reason"], name="uniq_incident_per_deadline"
            )
        ]
        indexes = [
            # The held incidents, looked at on every cycle to release them.
            models.Index(
                fields=["held_under"],
                name="incident_held",
                condition=Q(held_under__isnull=False, released_at__isnull=True),
            ),
            models.Index(
                fields=["monitor"], name="incident_open", condition=Q(resolved_at__isnull=True)
            ),
            # The most recent incidents first (the on-call incidents page).
            models.Index(fields=["-opened_at"], name="incident_recent"),
        ]

    def __str__(self) -> str:
        return self.summary

    @property
    def dedup_key(self) -> str:
        """PagerDuty ``dedup_key``: stable for the incident, so trigger and resolve pair."""
        return f"tidemark-watchdog-{self.monitor.ping_key.hex[:12]}-{self.pk}"


class PageGroup(models.Model):
    """Triggers to one channel merged into one page: after an outage, many deadlines come
    due at once, and a flood of pages helps nobody (PagerDuty also takes only about 120
    events a minute per routing key). Resolved when all its incidents are."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="page_groups")
    summary = models.CharField(max_length=1024)
    monitors = models.JSONField(default=list, help_text="Names of the monitors in the group.")
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.summary

    @property
    def dedup_key(self) -> str:
        return f"tidemark-watchdog-group-{self.pk}"


class Page(models.Model):
    """One message to one channel about one incident (the paging outbox). Claimed with a
    lease and a claim token, retried with the shared classification and backoff."""

    class Action(models.TextChoices):
        TRIGGER = "trigger"
        RESOLVE = "resolve"

    class State(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed", "failed for good (rejected or out of attempts)"
        CANCELLED = "cancelled", "resolved before its trigger was sent"
        GROUPED = "grouped", "sent as part of a page group"

    # A page is about one incident, or about a group of them.
    incident = models.ForeignKey(
        Incident, null=True, blank=True, on_delete=models.CASCADE, related_name="pages"
    )
    group = models.ForeignKey(
        PageGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="pages"
    )
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="pages")
    action = models.CharField(max_length=16, choices=Action.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["incident", "channel", "action"], name="uniq_page_per_action"
            ),
            models.UniqueConstraint(
                fields=["group", "action"],
                name="uniq_group_page_per_action",
                condition=Q(incident__isnull=True),
            ),
        ]
        indexes = [
            models.Index(fields=["next_attempt_at"], name="page_due", condition=Q(state="pending"))
        ]

    def __str__(self) -> str:
        return f"{self.action} of incident {self.incident_id} to {self.channel_id} ({self.state})"


class ApiToken(models.Model):
    """A token for the watchdog's REST API (``wd_<public id>_<secret>``), stored as a
    digest. The catalog holds one to manage its monitors."""

    name = models.CharField(max_length=100)
    public_id = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} (wd_{self.public_id}_…)"


class PingKey(models.Model):
    """A key for pinging an owner's monitors by slug (``/ping/<key>/<slug>``, with
    ``?create=1`` creating the monitor on first ping). The key is in the URL, so it is
    22 lowercase letters and digits (about 113 bits); it is kept as its SHA-256 digest and
    shown once, at creation."""

    owner = models.CharField(max_length=64, help_text="Owner label (a team slug).")
    name = models.CharField(max_length=100, blank=True)
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=4, help_text="The key's first characters, to tell it.")
    created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner"], name="ping_key_owner")]

    def __str__(self) -> str:
        return f"{self.owner} ping key {self.prefix}…"


class LoopState(models.Model):
    """A single row: when the loop last ran and how its own heartbeat went."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_cycle_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    heartbeat_ok = models.BooleanField(default=True)
    heartbeat_error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"watchdog loop, last cycle {self.last_cycle_at}"


class Operator(models.Model):
    """A person who may use the on-call pages, kept in the watchdog's own database (not
    Django's ``auth.User``, which lives in the catalog's), so the pages work when the
    watchdog is deployed alone and while the catalog is down.

    An operator sees and acts on the monitors whose owner label is in ``labels`` (team
    slugs, as the catalog sets them), or on every monitor with ``all_labels``.
    """

    username = models.CharField(max_length=150, unique=True)
    password = models.CharField(max_length=128, help_text="A django.contrib.auth hash.")
    is_active = models.BooleanField(default=True)
    all_labels = models.BooleanField(default=False, help_text="Sees every owner label.")
    labels = models.JSONField(default=list, blank=True, help_text="Owner labels it may see.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.username

    def may_see(self, owner: str) -> bool:
        """Whether a monitor with this owner label is visible to (and may be paused by)
        this operator."""
        return self.all_labels or owner in self.labels


class OperatorSession(models.Model):
    """A signed-in browser: the cookie holds a random key, this row its SHA-256 digest.
    Ended by logging out, after ``idle`` without a request, or at ``expires_at``."""

    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="sessions")
    key_digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    expires_at = models.DateTimeField(help_text="Absolute end, however active the session.")

    def __str__(self) -> str:
        return f"session of {self.operator_id} from {self.created_at}"


class LoginThrottle(models.Model):
    """Failed sign-ins counted per key (``user:<name>`` or ``addr:<ip>``) in a fixed
    window, in the watchdog's own database (it uses no cache server)."""

    key = models.CharField(max_length=200, unique=True)
    window_start = models.DateTimeField(db_index=True)
    failures = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.key}: {self.failures} since {self.window_start}"
