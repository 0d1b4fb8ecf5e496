"""Opening and resolving incidents, and queueing their pages (one row per channel).

Every write happens inside the caller's transaction on the watchdog's database. An incident
is unique per (monitor, deadline, reason), so two loops judging the same deadline open it
once and queue one trigger per channel.

One cause, one page: a missed deadline is ``part_of`` the incident already paging for its
cause (``causes_of_missed``), and a page resolves when every incident it stands for has.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, connections, transaction
from django.db.models import Q

from . import db, schedule
from .models import Incident, Monitor, Page, PageGroup, Ping


def open_incident(
    monitor: Monitor,
    *,
    reason: str,
    deadline_at: datetime,
    partition: str = "",
    summary: str,
    now: datetime,
    page: bool = True,
    part_of: Incident | None = None,
) -> Incident | None:
    """Open the incident for (monitor, deadline, reason) and queue a trigger to each of the
    monitor's channels; None when it is already open (another loop got there first).

    Every incident of a partitioned monitor names a partition: without one given, the
    partition it is about is found from ``deadline_at`` (``partition_about``).

    Args:
        deadline_at: the missed deadline (UTC), or the failure's time for ``failed``, the
            run's start for ``runtime``, the scheduled start for ``start_late``.
        partition: the partition the deadline expected, or the failure named, if any.
        page: queue the triggers (False records the incident without paging).
        part_of: the incident that pages for this one (then it queues no trigger).
    """
    if monitor.partitioning and not partition:
        partition = partition_about(monitor, deadline_at)
    try:
        with transaction.atomic(using=db.alias()):
            incident = Incident.objects.create(
                monitor=monitor,
                reason=reason,
                deadline_at=deadline_at,
                partition=partition,
                summary=summary[:1024],
                opened_at=now,
                part_of=part_of,
            )
    except IntegrityError:
        return None
    if not page or part_of is not None:
        return incident
    Page.objects.bulk_create(
        Page(incident=incident, channel=channel, action=Page.Action.TRIGGER, next_attempt_at=now)
        for channel in monitor.channels.all()
    )
    return incident


def partition_about(monitor: Monitor, at: datetime) -> str:
    """The partition an incident of ``monitor`` at ``at`` (aware UTC) is about: of those
    the run at ``at`` works towards (``schedule.partitions_for``), the first without a
    success ping, else the newest of them; "" for a monitor without partitions."""
    expected = schedule.partitions_for(monitor, at)
    if not expected:
        return ""
    pinged = set(
        Ping.objects.filter(
            monitor=monitor, kind=Ping.Kind.SUCCESS, partition__in=expected
        ).values_list("partition", flat=True)
    )
    return next((key for key in expected if key not in pinged), expected[-1])


def resolve(incidents: list[Incident], *, now: datetime) -> int:
    """Resolve open incidents, and the pages of those whose every part has resolved.

    A trigger still waiting to be sent (not claimed by a sender) is cancelled instead of
    followed by a resolve, so a trigger is never sent after its resolve and nobody is
    woken for what already recovered. A page standing for several incidents (``part_of``)
    resolves with the last of them.

    Call in a transaction: the subjects of the incidents' monitors are locked until it
    ends (``lock_subjects``). Two pings resolving a dataset's data and pipeline incidents
    at once would otherwise each see the other's still open, and neither would queue the
    resolve.

    Lock order, the same for every caller (a ping or a pause, which first lock their
    monitor's row): the subjects' advisory locks, sorted; the incidents, by id; the pages
    of the incidents resolving; then the page groups those were paged in, all at once and
    by id. Two pings resolving incidents grouped in the same page groups, or one
    incident while a loop holds another (``holds``, which never waits for a lock), so
    never deadlock.

    Returns:
        How many incidents this call resolved (compare-and-set on ``resolved_at``).
    """
    lock_subjects([incident.monitor for incident in incidents])
    resolved = 0
    paging: list[int] = []
    for incident in sorted(incidents, key=lambda i: i.pk):
        if not Incident.objects.filter(pk=incident.pk, resolved_at__isnull=True).update(
            resolved_at=now
        ):
            continue
        resolved += 1
        paging.append(incident.part_of_id or incident.pk)
    done = [
        root
        for root in dict.fromkeys(paging)
        if not Incident.objects.filter(
            Q(pk=root) | Q(part_of_id=root), resolved_at__isnull=True
        ).exists()
    ]
    for root in done:
        _resolve_pages(root, now=now)
    _resolve_groups(done, now=now)
    return resolved


def _resolve_pages(incident_id: int, *, now: datetime) -> None:
    """Cancel the incident's unsent triggers and queue resolves for the sent ones (its
    page groups are ``_resolve_groups``').

    A trigger a sender holds (``claim_token``) may be on its way, even past its lease: a
    loop sends a claimed batch page after page, so the last ones go out long after the
    one lease they share ran out. It is not cancelled but followed by a resolve, sent
    once the trigger is recorded (or retried by the next sender, if that one crashed)."""
    Page.objects.filter(
        claim_token__isnull=True,
        incident_id=incident_id,
        action=Page.Action.TRIGGER,
        state=Page.State.PENDING,
    ).update(state=Page.State.CANCELLED, last_error="resolved before it was sent")
    to_tell = Page.objects.filter(incident_id=incident_id, action=Page.Action.TRIGGER).exclude(
        state__in=(Page.State.CANCELLED, Page.State.GROUPED)
    )
    Page.objects.bulk_create(
        [
            Page(
                incident_id=incident_id,
                channel_id=page.channel_id,
                action=Page.Action.RESOLVE,
                next_attempt_at=now,
            )
            for page in to_tell
        ],
        ignore_conflicts=True,
    )


def subject_of(monitor: Monitor) -> str:
    """What ``monitor`` watches together with other monitors: its external id up to the
    last ``:`` (the catalog names a critical dataset's monitors
    ``tidemark:dataset:<id>:data`` and ``...:pipeline``); "" when it shares none."""
    head, colon, _ = monitor.external_id.rpartition(":")
    return head if colon else ""


def _of_subjects(monitors: list[Monitor]) -> Q:
    """Incidents of ``monitors`` or of any monitor sharing a subject with one of them."""
    condition = Q(monitor_id__in=[m.pk for m in monitors])
    for subject in {subject_of(m) for m in monitors} - {""}:
        condition |= Q(monitor__external_id__startswith=f"{subject}:")
    return condition


def lock_subjects(monitors: list[Monitor]) -> None:
    """Serialise, until the transaction ends, the judging of monitors sharing a subject
    with ``monitors`` (two loops judging a dataset's data and pipeline monitors must see
    each other's incidents). PostgreSQL only: SQLite runs one writer at a time anyway."""
    subjects = sorted({subject_of(m) for m in monitors} - {""})
    connection = connections[db.alias()]
    if not subjects or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext('tidemark-watchdog-subject:' || s)) "
            "FROM UNNEST(%s::text[]) AS s ORDER BY s",
            [subjects],
        )


def causes_of_missed(
    missed: list[tuple[Monitor, datetime, tuple[datetime, datetime]]],
) -> list[Incident | int | None]:
    """For each missed deadline about to be opened, what pages for it.

    The rule: a missed deadline is part of the newest open ``failed`` incident that its
    monitor, or a monitor sharing its subject, reported in the deadline's run window (the
    run for this deadline reported failure, then missed it); else of the open ``missed``
    incident of a monitor sharing its subject at the same deadline (the data and the
    pipeline of one dataset); else it pages itself. Callers lock the subjects first
    (``lock_subjects``).

    Args:
        missed: (monitor, deadline, (opens, closes]: the deadline's run window) per entry.

    Returns:
        Per entry, in order: the existing incident that pages for it, the index of an
        earlier entry that does (the same subject and deadline), or None.
    """
    if not missed:
        return []
    monitors = list({m.pk: m for m, _, _ in missed}.values())
    failures = list(
        Incident.objects.filter(
            _of_subjects(monitors), reason=Incident.Reason.FAILED, resolved_at__isnull=True
        )
        .select_related("monitor")
        .order_by("-deadline_at", "-pk")
    )
    same_deadline = {
        (subject_of(i.monitor), i.deadline_at): i.part_of or i
        for i in Incident.objects.filter(
            _of_subjects(monitors),
            reason=Incident.Reason.MISSED,
            deadline_at__in={d for _, d, _ in missed},
            resolved_at__isnull=True,
        ).select_related("monitor", "part_of")
        if subject_of(i.monitor)
    }
    causes: list[Incident | int | None] = []
    earlier: dict[tuple[str, datetime], int] = {}
    for index, (monitor, deadline, (opens, closes)) in enumerate(missed):
        subject = subject_of(monitor)
        failure = next(
            (
                f
                for f in failures
                if (f.monitor_id == monitor.pk or (subject and subject_of(f.monitor) == subject))
                and opens < f.deadline_at <= closes
            ),
            None,
        )
        if failure is not None:
            causes.append(failure)
        elif subject and (subject, deadline) in same_deadline:
            causes.append(same_deadline[(subject, deadline)])
        elif subject and (subject, deadline) in earlier:
            causes.append(earlier[(subject, deadline)])
        else:
            causes.append(None)
            if subject:
                earlier[(subject, deadline)] = index
    return causes


def _resolve_groups(incident_ids: list[int], *, now: datetime) -> None:
    """Resolve each page group these incidents were paged in once all its incidents are."""
    if not incident_ids:
        return
    group_ids = Page.objects.filter(
        incident_id__in=incident_ids, state=Page.State.GROUPED
    ).values_list("group_id", flat=True)
    # Locked so that of two incidents of a group resolving at once, the later sees the
    # earlier resolved: without it, each could find the other still open. All of them in
    # one statement, by id: two callers locking their groups one incident at a time
    # could each wait for a group the other holds.
    for group in (
        PageGroup.objects.select_for_update()
        .filter(pk__in=list(group_ids), resolved_at__isnull=True)
        .order_by("pk")
    ):
        still_open = (
            Page.objects.filter(group=group, state=Page.State.GROUPED)
            .filter(
                Q(incident__resolved_at__isnull=True)
                | Q(incident__parts__resolved_at__isnull=True, incident__parts__isnull=False)
            )
            .exists()
        )
        if still_open or not PageGroup.objects.filter(pk=group.pk, resolved_at__isnull=True).update(
            resolved_at=now
        ):
            continue
        # The compare-and-set above lets exactly one caller queue the group's resolve, or
        # cancel its trigger if that was never sent (held while Tidemark was degraded).
        if Page.objects.filter(
            claim_token__isnull=True,  # one being sent is followed by a resolve instead
            group=group,
            incident__isnull=True,
            action=Page.Action.TRIGGER,
            state=Page.State.PENDING,
        ).update(state=Page.State.CANCELLED, last_error="resolved before it was sent"):
            continue
        Page.objects.create(
            group=group,
            channel_id=group.channel_id,
            action=Page.Action.RESOLVE,
            next_attempt_at=now,
        )
