"""Managing monitors and channels (what the REST API and the admin call)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction

import outbound
from outbound import pagerduty
from problems import REQUIRED_DETAIL, FieldError, FieldWarning, ValidationProblem, invalid_choice
from schedules import DAILY, HOURLY, MONTHLY, calendars, cron_checks
from schedules.periods import validate_timezone

from . import datacheck, db, incidents, paging, pings, schedule
from .channels import check_target as check_channel_target
from .models import Channel, Monitor

# Changing one of these re-plans the next deadline.
SCHEDULE_FIELDS = {
    "kind",
    "period_seconds",
    "cron",
    "timezone",
    "partitioning",
    "partition_timezone",
    "grace_seconds",
    "start_cron",
    "start_grace_seconds",
    "calendar",
    "holidays_country",
    "holidays_subdivision",
    "non_business_day",
}
# The watchdog's own state of a monitor: shown, never set by its managers.
STATE_FIELDS = [
    "state",
    "deadline_at",
    "check_at",
    "start_expected_at",
    "start_check_at",
    "last_ping_at",
    "last_ping_kind",
    "last_success_at",
    "last_partition",
    "paused_by",
    "paused_at",
    "paused_by_definition",
]


_REQUIRED = REQUIRED_DETAIL.rstrip(".")  # "This field is required", then when


def validate(monitor: Monitor) -> None:
    """Check the rules a field's type cannot say (schedule, start lateness, storage check).

    Raises:
        ValidationProblem: one ``FieldError`` per broken rule, naming the field.
    """
    problems: list[FieldError] = []
    if monitor.kind == Monitor.Kind.PERIOD:
        if not monitor.period_seconds:
            problems.append(
                FieldError("period_seconds", f"{_REQUIRED} for a period monitor.", "required")
            )
    else:
        if not monitor.cron:
            problems.append(FieldError("cron", "required for a deadline monitor", "required"))
        elif (refused := cron_checks.field_problem("cron", monitor.cron)) is not None:
            problems.append(refused)
    for field in ("timezone", "partition_timezone"):
        try:
            validate_timezone(getattr(monitor, field))
        except ValueError as exc:
            problems.append(FieldError(field, str(exc), "iana_time_zone"))
    if monitor.partitioning and monitor.partitioning not in (HOURLY, DAILY, MONTHLY):
        problems.append(
            invalid_choice("partitioning", monitor.partitioning, ("", HOURLY, DAILY, MONTHLY))
        )
    if monitor.partitioning and monitor.kind != Monitor.Kind.DEADLINE:
        problems.append(
            FieldError("partitioning", "only deadline monitors expect partitions", "deadline_only")
        )
    problems += _start_problems(monitor)
    if not problems:  # a calendar is checked against a valid cron and zone
        problems += calendar_problems(monitor)
    problems += datacheck.definition_problems(monitor)
    problems += slug_problems(monitor)
    problems += link_problems(monitor.links)
    if problems:
        raise ValidationProblem.of("Some monitor fields are not valid.", problems)


SLUG = re.compile(r"[a-z0-9_-]{1,100}")


def slug_problems(monitor: Monitor) -> list[FieldError]:
    """A slug (optional) is 1 to 100 of ``a-z``, ``0-9``, ``-`` and ``_`` (the rule of the
    common ping services' slug URLs), and no other monitor of the same owner has it.

    Returns:
        One FieldError naming ``slug`` (rule ``slug_format`` or ``slug_taken``), or none.
    """
    if not monitor.slug:
        return []
    if not SLUG.fullmatch(monitor.slug):
        return [
            FieldError(
                "slug",
                f"{monitor.slug[:120]!r} is not a slug: 1 to 100 of a-z, 0-9, '-' and '_'",
                "slug_format",
            )
        ]
    others = Monitor.objects.filter(owner=monitor.owner, slug=monitor.slug)
    if monitor.pk is not None:
        others = others.exclude(pk=monitor.pk)
    if others.exists():
        owner = f"owner {monitor.owner!r}" if monitor.owner else "no owner"
        return [
            FieldError(
                "slug", f"another monitor of {owner} has the slug {monitor.slug!r}", "slug_taken"
            )
        ]
    return []


LINKS_MAX = 5
LINK_TEXT_MAX_CHARS = 200


def link_problems(links: object) -> list[FieldError]:
    """Links (optional) are a list of at most ``LINKS_MAX`` objects ``{"href", "text"}``:
    ``href`` an http(s) address with a host (``outbound.pagerduty.web_address``), ``text``
    (optional) at most ``LINK_TEXT_MAX_CHARS`` characters. Pages link to each; what the
    text may become in each receiving system is ``outbound``'s to decide.

    Returns:
        FieldErrors naming ``links`` or ``links.N.href``/``links.N.text`` (rules
        ``links_shape``, ``http_url``, ``link_text``), or none.
    """
    if not isinstance(links, list) or len(links) > LINKS_MAX:
        return [FieldError("links", f"a list of at most {LINKS_MAX} {{href, text}}", "links_shape")]
    problems = []
    for index, entry in enumerate(links):
        if not isinstance(entry, dict) or set(entry) - {"href", "text"}:
            problems.append(FieldError(f"links.{index}", "an object {href, text}", "links_shape"))
            continue
        href, text = entry.get("href"), entry.get("text", "")
        if not isinstance(href, str) or not pagerduty.web_address(href):
            problems.append(
                FieldError(f"links.{index}.href", "must be an http(s) URL with a host", "http_url")
            )
        if not isinstance(text, str) or len(text) > LINK_TEXT_MAX_CHARS:
            problems.append(
                FieldError(
                    f"links.{index}.text",
                    f"must be text of at most {LINK_TEXT_MAX_CHARS} characters",
                    "link_text",
                )
            )
    return problems


def warnings(monitor: Monitor) -> list[FieldWarning]:
    """Warnings about the monitor's ``cron`` and ``start_cron`` (accepted, but probably
    meaning something else: ``schedules.check_cron``); none for a period monitor's."""
    found = []
    if monitor.kind != Monitor.Kind.DEADLINE:
        return found
    for field in ("cron", "start_cron"):
        found += cron_checks.field_warnings(field, getattr(monitor, field))
    return found


def calendar_problems(monitor: Monitor) -> list[FieldError]:
    """A calendar's rules (``schedules.calendars``): holiday codes the ``holidays``
    package knows, a calendar only on a deadline monitor, and a ``cron`` (and
    ``start_cron``) that fires on business days.

    Returns:
        One FieldError naming ``holidays_country``, ``holidays_subdivision``, ``calendar``,
        ``cron`` or ``start_cron`` (rule ``calendar``, the detail naming the value and
        where the valid codes are listed), or none.
    """
    try:
        calendars.validate(monitor.holidays_country or None, monitor.holidays_subdivision or None)
        if schedule.calendar_of(monitor) is None:
            return []
        if monitor.kind != Monitor.Kind.DEADLINE:
            return [
                FieldError("calendar", "only deadline monitors take a calendar", "deadline_only")
            ]
        now = datetime.now(UTC)
        schedule.first_deadline(monitor, now=now)
        if monitor.start_cron:
            try:
                schedule.first_expected_start(monitor, now=now)
            except calendars.CalendarError as exc:
                exc.field = "start_cron"
                raise
    except calendars.CalendarError as exc:
        return [FieldError(exc.field, f"{exc.field} {exc.value!r}: {exc}", "calendar")]
    return []


def _start_problems(monitor: Monitor) -> list[FieldError]:
    """Start lateness: a period monitor needs only ``start_grace_seconds``; a deadline
    monitor also needs ``start_cron`` (when its job is scheduled to start)."""
    problems = []
    if monitor.start_cron:
        if monitor.kind != Monitor.Kind.DEADLINE:
            problems.append(
                FieldError(
                    "start_cron",
                    "only deadline monitors take a start schedule; a period monitor expects "
                    "each start one period after the previous one",
                    "deadline_only",
                )
            )
        if (refused := cron_checks.field_problem("start_cron", monitor.start_cron)) is not None:
            problems.append(refused)
        if monitor.start_grace_seconds is None:
            problems.append(
                FieldError("start_grace_seconds", f"{_REQUIRED} with start_cron.", "required")
            )
    elif monitor.start_grace_seconds is not None and monitor.kind == Monitor.Kind.DEADLINE:
        problems.append(
            FieldError("start_cron", f"{_REQUIRED} with start_grace_seconds.", "required")
        )
    return problems


def reschedule(monitor: Monitor, *, now: datetime, keep_owed: bool = False) -> None:
    """Plan the monitor's next deadline and next expected start from ``now`` (aware UTC),
    in memory (the caller saves); a paused monitor keeps neither.

    With ``keep_owed`` (a schedule change of a watched monitor), a deadline or expected
    start that has passed but is not judged yet (still in its grace) is not skipped: a
    deadline monitor's new schedule is planned from just before it, so the new rule
    judges that moment, as the catalog's freshness does on an SLA change.
    """
    if monitor.state == Monitor.State.PAUSED:
        monitor.deadline_at = monitor.check_at = None
        monitor.start_expected_at = monitor.start_check_at = None
        return
    plan_from = _owed_from(monitor.deadline_at, now) if keep_owed else now
    start_from = _owed_from(monitor.start_expected_at, now) if keep_owed else now
    monitor.start_expected_at = schedule.first_expected_start(monitor, now=start_from)
    monitor.start_check_at = schedule.start_check_at(monitor, monitor.start_expected_at)
    monitor.deadline_at = schedule.first_deadline(monitor, now=plan_from)
    monitor.check_at = (
        schedule.check_at(monitor, monitor.deadline_at) if monitor.deadline_at else None
    )


def _owed_from(planned: datetime | None, now: datetime) -> datetime:
    """Where a re-plan starts: just before a planned moment that has passed unjudged."""
    if planned is None or planned > now:
        return now
    return planned - timedelta(seconds=1)


def monitor_create(
    *, channels: list[Channel] | None = None, now: datetime, **fields: Any
) -> Monitor:
    """Create a monitor. A deadline monitor is watched from its next deadline at once; a
    period monitor from its first ping (as in the common dead-man's-switch convention).

    Raises:
        ValidationProblem: a schedule field breaks a rule (400, naming it).
    """
    monitor = Monitor(**fields)
    validate(monitor)
    reschedule(monitor, now=now)
    with transaction.atomic(using=db.alias()):
        monitor.save()
        if channels is not None:
            monitor.channels.set(channels)
    return monitor


def monitor_update(
    monitor: Monitor, *, channels: list[Channel] | None = None, now: datetime, **changes: Any
) -> Monitor:
    """Change a monitor. A real change of schedule re-plans its next deadline from ``now``,
    keeping a passed deadline still in its grace (``reschedule``'s ``keep_owed``); the same
    values again leave the deadline being watched alone."""
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().get(pk=monitor.pk)
        changed = {name for name, value in changes.items() if getattr(monitor, name) != value}
        for name, value in changes.items():
            setattr(monitor, name, value)
        validate(monitor)
        if SCHEDULE_FIELDS & changed:
            reschedule(monitor, now=now, keep_owed=True)
        monitor.save()
        if channels is not None:
            monitor.channels.set(channels)
    return monitor


def monitor_pause(
    monitor: Monitor, *, now: datetime, by: str = "", by_definition: bool = False
) -> Monitor:
    """Stop judging deadlines and resolve what is open (no pages while paused).

    A pause sticks: nothing but ``monitor_resume`` lifts it (no ping, no update of the
    definition), except that a pause made only by the managing system's definition
    (``by_definition``) is lifted by that definition turning active again.

    Args:
        by: who pauses it, kept with the time until it is resumed (a second pause of a
            paused monitor keeps the first, unless a person pauses what only the
            definition had paused: then the pause is that person's).
        by_definition: the managing system's definition says the monitor is inactive.
    """
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().get(pk=monitor.pk)
        if monitor.state != Monitor.State.PAUSED or (
            monitor.paused_by_definition and not by_definition
        ):
            monitor.paused_by, monitor.paused_at = by[:150], now
            monitor.paused_by_definition = by_definition
        monitor.state = Monitor.State.PAUSED
        # The next expected start is kept (not judged while paused): a start made before
        # the pause may already have counted for it.
        kept = monitor.start_expected_at
        reschedule(monitor, now=now)
        if monitor.kind == Monitor.Kind.DEADLINE:
            monitor.start_expected_at = kept
        monitor.save()
        incidents.resolve(list(monitor.incidents.filter(resolved_at__isnull=True)), now=now)
    return monitor


def monitor_resume(monitor: Monitor, *, now: datetime) -> Monitor:
    """Judge deadlines again, from the next one after ``now`` (missed ones stay missed).
    A monitor that is not paused is left as it is (its deadline and incidents stand)."""
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().get(pk=monitor.pk)
        if monitor.state != Monitor.State.PAUSED:
            return monitor
        monitor.state = Monitor.State.UP if monitor.last_success_at else Monitor.State.NEW
        monitor.paused_by, monitor.paused_at = "", None
        monitor.paused_by_definition = False
        if monitor.kind == Monitor.Kind.PERIOD:
            # A resumed period monitor gets a full period before it can be late.
            if monitor.last_success_at:
                monitor.last_success_at = max(monitor.last_success_at, now)
            if monitor.last_start_at:
                monitor.last_start_at = max(monitor.last_start_at, now)
        kept = monitor.start_expected_at
        reschedule(monitor, now=now)
        if kept and monitor.start_expected_at and kept > monitor.start_expected_at:
            # The starts expected before it were made before the pause: they stay counted.
            monitor.start_expected_at = kept
            monitor.start_check_at = schedule.start_check_at(monitor, kept)
        monitor.save()
    return monitor


def channel_create(*, kind: str, name: str, target: str, owner: str = "") -> tuple[Channel, str]:
    """Create a channel. A webhook channel gets a Standard Webhooks signing secret,
    returned once (``""`` for other kinds) and kept encrypted.

    Raises:
        ValidationProblem: the target is refused (``channels.target_refusal``).
    """
    check_channel_target(kind=kind, target=target)
    secret = outbound.generate_secret() if kind == Channel.Kind.WEBHOOK else ""
    channel = Channel.objects.create(
        kind=kind,
        name=name,
        target=target,
        owner=owner,
        secret_encrypted=paging.encrypt(secret) if secret else "",
    )
    return channel, secret


def display_state(monitor: Monitor, *, now: datetime) -> str:
    """The state shown to people: ``grace`` while a deadline has passed but its grace has
    not, else the stored state (new, up, down, paused)."""
    if (
        monitor.state in (Monitor.State.UP, Monitor.State.NEW)
        and monitor.deadline_at is not None
        and monitor.deadline_at < now <= (monitor.check_at or now)
    ):
        return "grace"
    return monitor.state


def channel_for(*, kind: str, target: str, owner: str, name: str) -> Channel:
    """The channel with this kind, target and owner, created on first use (channels handed
    over by a managing system, e.g. a team's PagerDuty routing key)."""
    channel = Channel.objects.filter(kind=kind, target=target, owner=owner).first()
    if channel is None:
        channel, _ = channel_create(kind=kind, name=name, target=target, owner=owner)
    return channel


def monitor_upsert_external(
    *,
    external_id: str,
    version: str,
    channels: list[Channel],
    now: datetime,
    active: bool = True,
    by: str = "",
    ready_partitions: list[str] | None = None,
    **fields: Any,
) -> tuple[Monitor, bool]:
    """Create or update the monitor a managing system knows as ``external_id``.

    Idempotent, and safe against reordering: a definition whose ``version`` sorts before
    the stored one (a late retry) changes nothing, its ``ready_partitions`` included.

    Args:
        active: False pauses the monitor (``by`` the caller, as the definition's pause);
            True lifts only that pause: a monitor someone paused stays paused.
        ready_partitions: partition keys already ready that its deadlines may expect,
            recorded as success pings in the same transaction (``pings.record_ready``),
            so no deadline is judged between the monitor's creation and its feed.

    Returns:
        ``(monitor, changed)``.

    Raises:
        ValidationProblem: a field breaks a rule, or a ready partition is not a key of
            the monitor's partitioning (``ready_partitions.N``) or it has none.
    """
    with transaction.atomic(using=db.alias()):
        monitor = Monitor.objects.select_for_update().filter(external_id=external_id).first()
        if monitor is None:
            monitor = monitor_create(
                channels=channels,
                now=now,
                external_id=external_id,
                external_version=version,
                **fields,
            )
        elif version and monitor.external_version and version < monitor.external_version:
            return monitor, False
        else:
            monitor = monitor_update(
                monitor, channels=channels, now=now, external_version=version, **fields
            )
        if not active and monitor.state != Monitor.State.PAUSED:
            monitor = monitor_pause(monitor, now=now, by=by, by_definition=True)
        elif active and monitor.state == Monitor.State.PAUSED and monitor.paused_by_definition:
            monitor = monitor_resume(monitor, now=now)
        if ready_partitions:
            problems = pings.ready_partition_problems(monitor, ready_partitions, now=now)
            if problems:  # raised inside the transaction: the definition is not applied
                raise ValidationProblem("Some ready partitions are not valid.", errors=problems)
            pings.record_ready(monitor, ready_partitions, now=now)
            monitor.refresh_from_db()
        return monitor, True


def operators_channels() -> list[Channel]:
    """The operators' channels from ``WATCHDOG_OPERATORS_CHANNELS`` (a watchdog setting:
    ``[{"kind": "pagerduty", "target": "..."}]``), paged when Tidemark itself is degraded."""
    from django.conf import settings

    return [
        channel_for(
            kind=spec["kind"],
            target=spec["target"],
            owner="operators",
            name=spec.get("name", f"operators {spec['kind']}"),
        )
        for spec in settings.WATCHDOG_OPERATORS_CHANNELS
    ]
