"""Change management: change notices on datasets, acknowledgements by consumer teams, the
scheduler that reminds and tells when a notice takes effect, and the lifecycle rules.

Who is told (everything is rows through the durable delivery engine):

- on announcement, ``change_notice.announced`` to every subscriber endpoint of the dataset
  (whatever its partition pattern: a notice is about the whole dataset), and an owner
  notice to the human contacts of every consumer team (``selectors.dataset_consumer_teams``);
- at each reminder point before ``effective_at`` (``settings.TIDEMARK_CHANGE_NOTICES``),
  ``change_notice.reminder`` to the subscriber endpoints and contacts of the consumer teams
  that have not acknowledged;
- when it takes effect (its ``effective_at``, or earlier through apply-early),
  ``change_notice.effective`` to every subscriber endpoint and the owner team's contacts.

Each is sent once: the scheduler locks due notices with SKIP LOCKED, moves
``next_step_at`` with a compare-and-set, and every notification has a unique dedup key
(``change-notice:<id>:<step>``), so two schedulers, or one run twice, send each step once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction

from problems import FieldError, ValidationProblem

from . import errors, notice_periods, notices, passes, selectors
from .models import (
    AuditEntry,
    ChangeNotice,
    ChangeNoticeAcknowledgement,
    Dataset,
    Notification,
    Subscription,
    Team,
)
from .notices import iso

if TYPE_CHECKING:
    from .actors import Actor

logger = logging.getLogger(__name__)


def _reminder_seconds() -> list[int]:
    return list(settings.TIDEMARK_CHANGE_NOTICES["reminder_seconds"])


def acknowledge_path(notice: ChangeNotice) -> str:
    """Where a consumer team acknowledges ``notice`` (the API path, relative to the host)."""
    return f"/api/v1/datasets/{notice.dataset_id}/change-notices/{notice.pk}/acknowledgements"


# --- announcing ---------------------------------------------------------------------------


@transaction.atomic
def change_notice_announce(
    *,
    actor: Actor,
    dataset: Dataset,
    kind: str,
    description: str,
    effective_at: datetime,
    now: datetime,
    schema_diff: Any = None,
    link: str = "",
    emergency: bool = False,
    override_reason: str = "",
    require_acknowledgements: bool = False,
) -> ChangeNotice:
    """Announce a change of ``dataset`` by its owner team, effective at ``effective_at``.

    Rules: ``effective_at`` is not before ``now`` and is at least the dataset's
    ``change_notice_days`` after it (``notice_periods.earliest_effective_at``), unless
    ``emergency`` with a written ``override_reason``; an override is written to the audit
    trail and flagged on the notice and in everything sent about it.

    Args:
        kind: a ``ChangeNotice.Kind`` value.
        effective_at: aware UTC instant the change takes effect.
        now: aware UTC server time of the announcement (``announced_at``).
        schema_diff: optional JSON describing the schema change; link: optional URL.
        require_acknowledgements: the notice may take effect early once every consumer
            team has acknowledged it (``change_notice_apply_early``).

    Returns:
        The saved notice, its first reminder or its effective time in ``next_step_at``.

    Raises:
        NotDatasetOwner (403), ValidationProblem (400: ``effective_at`` in the past, an
        emergency without a reason or a reason without emergency, a malformed link),
        NoticePeriodTooShort (422, with ``earliest_effective_at``).

    Side effects: ``change_notice.announced`` to every subscriber endpoint, an owner
    notice to each consumer team's contacts, an ``AuditEntry``; the delivery doorbell
    rings after commit.
    """
    if dataset.owner_id != actor.team.pk:
        raise errors.NotDatasetOwner(f"{dataset} is owned by team {dataset.owner.slug}")
    reason = override_reason.strip()
    problems = []
    if emergency and not reason:
        problems.append(
            FieldError(
                "override_reason", "required for an emergency override", "required_for_emergency"
            )
        )
    if reason and not emergency:
        problems.append(
            FieldError("emergency", "an override_reason needs emergency: true", "emergency")
        )
    if effective_at < now:
        problems.append(FieldError("effective_at", "must not be in the past", "not_in_past"))
    if problems:
        raise ValidationProblem.of("The change notice is not valid.", problems)
    days = dataset.change_notice_days
    earliest = notice_periods.earliest_effective_at(now, days)
    if effective_at < earliest and not emergency:
        raise errors.NoticePeriodTooShort(
            f"{dataset} requires {days} days' notice of a change: effective_at must be at or "
            f"after {iso(earliest)}; or announce an emergency override with a reason",
            errors=[
                FieldError(
                    "effective_at", f"must be at or after {iso(earliest)}", "change_notice_days"
                )
            ],
            extra={
                "rule": "change_notice_days",
                "change_notice_days": days,
                "earliest_effective_at": iso(earliest),
            },
        )
    notice = ChangeNotice(
        dataset=dataset,
        kind=kind,
        description=description,
        schema_diff=schema_diff,
        link=link,
        announced_by=actor.label,
        announced_at=now,
        effective_at=effective_at,
        emergency=emergency,
        override_reason=reason,
        require_acknowledgements=require_acknowledgements,
    )
    steps = notice_periods.plan(
        announced_at=now, effective_at=effective_at, reminder_seconds=_reminder_seconds()
    )
    notice.next_step_at = steps[0].at
    notice.full_clean()
    notice.save()
    AuditEntry.objects.create(
        dataset=dataset,
        team=actor.team,
        actor=actor.label,
        action="change_notice.emergency_override" if emergency else "change_notice.announced",
        changes={
            "change_notice": [None, notice.pk],
            "kind": [None, kind],
            "effective_at": [None, iso(effective_at)],
            "earliest_effective_at": [None, iso(earliest)],
            "emergency": [None, emergency],
            "override_reason": [None, reason],
        },
    )
    _announce(notice, now=now)
    return notice


def notice_data(notice: ChangeNotice) -> dict[str, Any]:
    """The ``data`` every notification about ``notice`` carries."""
    dataset = notice.dataset
    return {
        "notice_id": notice.pk,
        "dataset": {"id": dataset.pk, "namespace": dataset.namespace, "name": dataset.name},
        "owner": dataset.owner.slug,
        "kind": notice.kind,
        "description": notice.description,
        "schema_diff": notice.schema_diff,
        "link": notice.link,
        "announced_at": iso(notice.announced_at),
        "effective_at": iso(notice.effective_at),
        "emergency": notice.emergency,
        "override_reason": notice.override_reason,
        "require_acknowledgements": notice.require_acknowledgements,
        "acknowledge_path": acknowledge_path(notice),
    }


def _announce(notice: ChangeNotice, *, now: datetime) -> None:
    data = notice_data(notice)
    notification = notices.notification_write(
        type=Notification.Type.CHANGE_NOTICE_ANNOUNCED,
        dataset=notice.dataset,
        dedup_key=f"change-notice:{notice.pk}:announced",
        data=data,
        now=now,
    )
    notices.fan_out(notification=notification, dataset=notice.dataset, partition_key=None, now=now)
    for team in selectors.dataset_consumer_teams(dataset=notice.dataset):
        notices.notify_owner(
            team=team,
            type=Notification.Type.CHANGE_NOTICE_ANNOUNCED,
            data=data,
            dedup_key=f"change-notice:{notice.pk}:announced:team:{team.pk}",
            now=now,
        )


# --- acknowledging and applying early -------------------------------------------------------


@transaction.atomic
def change_notice_acknowledge(
    *, actor: Actor, notice: ChangeNotice, now: datetime
) -> tuple[ChangeNoticeAcknowledgement, bool]:
    """Record that the actor's team, a consumer team of the notice's dataset, acknowledges
    ``notice``. Acknowledging again keeps the first acknowledgement.

    Args:
        now: aware UTC instant recorded as ``acknowledged_at``.

    Returns:
        ``(acknowledgement, created)``.

    Raises:
        NotAConsumer: the team is not a consumer team of the dataset (403).
    """
    consumers = selectors.dataset_consumer_teams(dataset=notice.dataset)
    if not consumers.filter(pk=actor.team.pk).exists():
        raise errors.NotAConsumer(
            f"team {actor.team.slug} is not a consumer of {notice.dataset}: only teams that "
            "declared they read it (a subscription) acknowledge its change notices"
        )
    return ChangeNoticeAcknowledgement.objects.get_or_create(
        notice=notice,
        team=actor.team,
        defaults={"acknowledged_by": actor.label, "acknowledged_at": now},
    )


def pending_teams(notice: ChangeNotice) -> list[Team]:
    """The consumer teams of the notice's dataset that have not acknowledged it, by slug."""
    return list(
        selectors.dataset_consumer_teams(dataset=notice.dataset).exclude(
            pk__in=ChangeNoticeAcknowledgement.objects.filter(notice=notice).values("team_id")
        )
    )


@transaction.atomic
def change_notice_apply_early(*, actor: Actor, notice: ChangeNotice, now: datetime) -> ChangeNotice:
    """Make a notice that requires acknowledgements take effect now, before its
    ``effective_at``, once every consumer team has acknowledged it.

    Args:
        now: aware UTC instant it takes effect (``took_effect_at``).

    Returns:
        The notice, in effect.

    Raises:
        NotDatasetOwner (403), ChangeNoticeInEffect (409), AcknowledgementsNotRequired
        (409), AcknowledgementsPending (409, naming ``pending_teams``).

    Side effects: ``change_notice.effective`` (as when the scheduler makes it take
    effect) and an ``AuditEntry``.
    """
    dataset = notice.dataset
    if dataset.owner_id != actor.team.pk:
        raise errors.NotDatasetOwner(f"{dataset} is owned by team {dataset.owner.slug}")
    notice = (
        ChangeNotice.objects.select_for_update().select_related("dataset__owner").get(pk=notice.pk)
    )
    if notice.state == ChangeNotice.State.EFFECTIVE:
        raise errors.ChangeNoticeInEffect(
            f"change notice {notice.pk} took effect at {iso(notice.took_effect_at)}"
        )
    if not notice.require_acknowledgements:
        raise errors.AcknowledgementsNotRequired(
            f"change notice {notice.pk} was announced without require_acknowledgements; it "
            f"takes effect at {iso(notice.effective_at)}",
            errors=[
                FieldError(
                    "require_acknowledgements", "false on this notice", "require_acknowledgements"
                )
            ],
        )
    waiting = [team.slug for team in pending_teams(notice)]
    if waiting:
        raise errors.AcknowledgementsPending(
            f"waiting for the acknowledgement of: {', '.join(waiting)}",
            extra={"rule": "all_acknowledged", "pending_teams": waiting},
        )
    _take_effect(notice, now=now)
    AuditEntry.objects.create(
        dataset=dataset,
        team=actor.team,
        actor=actor.label,
        action="change_notice.applied_early",
        changes={
            "change_notice": [None, notice.pk],
            "state": [ChangeNotice.State.ANNOUNCED, ChangeNotice.State.EFFECTIVE],
            "took_effect_at": [None, iso(notice.took_effect_at)],
        },
    )
    return notice


def _take_effect(notice: ChangeNotice, *, now: datetime) -> int | None:
    """Flip ``notice`` to effective (compare-and-set) and tell its subscribers and owner.

    ``took_effect_at`` is its ``effective_at`` when that has passed (a late scheduler run
    does not move it), else ``now`` (applied early).

    Returns:
        The deliveries written, or None when it already was in effect.
    """
    took_effect_at = min(now, notice.effective_at)
    flipped = ChangeNotice.objects.filter(pk=notice.pk, state=ChangeNotice.State.ANNOUNCED).update(
        state=ChangeNotice.State.EFFECTIVE, took_effect_at=took_effect_at, next_step_at=None
    )
    if flipped != 1:
        return None
    notice.state, notice.took_effect_at, notice.next_step_at = (
        ChangeNotice.State.EFFECTIVE,
        took_effect_at,
        None,
    )
    notification = _write_once(
        type=Notification.Type.CHANGE_NOTICE_EFFECTIVE,
        dataset=notice.dataset,
        dedup_key=f"change-notice:{notice.pk}:effective",
        data={
            **notice_data(notice),
            "took_effect_at": iso(took_effect_at),
            "applied_early": notice.applied_early,
        },
        now=now,
    )
    if notification is None:
        return 0
    return notices.fan_out(
        notification=notification,
        dataset=notice.dataset,
        partition_key=None,
        now=now,
        extra_endpoints=notices.contact_endpoints(notice.dataset.owner),
    )


def _write_once(**fields: Any) -> Notification | None:
    """``notices.notification_write``, or None when its dedup key exists (sent before)."""
    try:
        with transaction.atomic():
            return notices.notification_write(**fields)
    except IntegrityError:
        return None


# --- the scheduler --------------------------------------------------------------------------


@dataclass(frozen=True)
class StepReport:
    """One step the scheduler handled: ``kind`` reminder or effective; ``deliveries``
    written (0 when nobody was left to remind)."""

    notice_id: int
    kind: str
    seconds_before: int
    deliveries: int


def send_due(*, now: datetime, limit: int = 200) -> list[StepReport]:
    """Send the reminders and effective notifications due by ``now``, for up to ``limit``
    notices. Beat runs it every minute; running it twice, or two at once, sends each
    step once.

    Steps:
        1. Lock the announced notices whose ``next_step_at`` has come (SKIP LOCKED: two
           schedulers share them instead of waiting or doing them twice).
        2. Per notice, ask ``notice_periods.due`` what to send: the effective step wins
           over reminders; of several overdue reminders only the latest is sent.
        3. Move ``next_step_at`` to the following step by compare-and-set, and write the
           notification (its dedup key is unique) with a delivery per recipient endpoint.
        A notice whose step fails is logged and left as it was, for the next run.

    Args:
        now: aware UTC instant (the scheduler's clock).

    Returns:
        The steps handled, in ``next_step_at`` order.
    """
    return send_batch(now=now, limit=limit).steps


@dataclass(frozen=True)
class SendBatch:
    """One batch of ``send_batch``: the ``steps`` sent, how many due notices it
    ``locked`` and how many of those ``failed`` (left as they were)."""

    steps: list[StepReport]
    locked: int
    failed: int

    def full(self, limit: int) -> bool:
        """More may be due: the batch hit ``limit`` and moved at least one notice on (a
        batch of notices that all failed again would only spin)."""
        return self.locked == limit and self.failed < self.locked


def send_batch(*, now: datetime, limit: int = 200) -> SendBatch:
    """``send_due``, also saying how many notices it locked and how many failed, so a
    pass (``catalog.tasks.send_change_notices``) runs another batch while one comes back
    full."""
    reports: list[StepReport] = []
    failed = 0
    with transaction.atomic():
        due_notices = list(
            ChangeNotice.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("dataset__owner")
            .filter(state=ChangeNotice.State.ANNOUNCED, next_step_at__lte=now)
            .order_by("next_step_at", "id")[:limit]
        )
        for notice in due_notices:
            try:
                with transaction.atomic():
                    report = _handle_step(notice, now=now)
            except Exception:  # one bad notice must not hold up the others
                logger.exception("change notice %s: sending its due step failed", notice.pk)
                failed += 1
                continue
            if report is not None:
                reports.append(report)
    return SendBatch(steps=reports, locked=len(due_notices), failed=failed)


def send_pass(
    *,
    clock: Callable[[], datetime],
    limit: int = 200,
    budget_seconds: float | None = None,
    on_step: Callable[[StepReport], None] = lambda step: None,
) -> passes.PassSummary:
    """Send what is due in batches of ``limit`` notices until a batch comes back short
    or ``budget_seconds`` are spent (``passes.run_batches``).

    Args:
        clock: returns the aware UTC instant each batch sends at (read per batch).
        on_step: called with each step sent (the task logs them).

    Returns:
        The summary: ``handled`` counts the steps sent; ``more_due`` says the budget
        ran out with notices possibly left, and the caller rings for another pass.
    """

    def batch() -> tuple[int, bool]:
        sent = send_batch(now=clock(), limit=limit)
        for step in sent.steps:
            on_step(step)
        return len(sent.steps), sent.full(limit)

    return passes.run_batches(batch, budget_seconds=budget_seconds)


def _handle_step(notice: ChangeNotice, *, now: datetime) -> StepReport | None:
    steps = notice_periods.plan(
        announced_at=notice.announced_at,
        effective_at=notice.effective_at,
        reminder_seconds=_reminder_seconds(),
    )
    due = notice_periods.due(steps, since=notice.next_step_at, now=now)
    if due.step is not None and due.step.kind == notice_periods.EFFECTIVE:
        deliveries = _take_effect(notice, now=now)
        if deliveries is None:
            return None
        return StepReport(notice.pk, notice_periods.EFFECTIVE, 0, deliveries)
    moved = ChangeNotice.objects.filter(
        pk=notice.pk, state=ChangeNotice.State.ANNOUNCED, next_step_at=notice.next_step_at
    ).update(next_step_at=due.next_at)
    if moved != 1 or due.step is None:
        return None
    return StepReport(
        notice.pk, notice_periods.REMINDER, due.step.seconds_before, _remind(notice, due.step, now)
    )


def _remind(notice: ChangeNotice, step: notice_periods.Step, now: datetime) -> int:
    """Remind the consumer teams that have not acknowledged ``notice``; returns the
    deliveries written (0: everyone acknowledged, or this reminder was sent before)."""
    waiting = pending_teams(notice)
    if not waiting:
        return 0
    kind = Notification.Type.CHANGE_NOTICE_REMINDER
    notification = _write_once(
        type=kind,
        dataset=notice.dataset,
        dedup_key=f"change-notice:{notice.pk}:reminder:{step.seconds_before}",
        data={**notice_data(notice), "reminder_seconds_before": step.seconds_before},
        now=now,
    )
    if notification is None:
        return 0
    return notices.queue(notification, _team_endpoints(notice.dataset, waiting, kind), now=now)


def _team_endpoints(dataset: Dataset, teams: list[Team], kind: str) -> set[int]:
    """The endpoints of ``teams`` a ``kind`` notice about ``dataset`` goes to: their
    subscriptions' webhooks whose event types let it through, and their human contacts."""
    subscribers = notices.subscription_subscribers(
        Subscription.objects.filter(dataset=dataset, team__in=teams)
    )
    endpoint_ids = notices.matching_endpoints(subscribers, type=kind, partition_key=None)
    for team in teams:
        endpoint_ids.update(e.pk for e in notices.contact_endpoints(team))
    return endpoint_ids


# --- dataset lifecycle ----------------------------------------------------------------------

_LIFECYCLE_NOTICE = {
    Dataset.Lifecycle.DEPRECATED: ChangeNotice.Kind.DEPRECATION,
    Dataset.Lifecycle.RETIRED: ChangeNotice.Kind.RETIREMENT,
}


# What a refused lifecycle change is told to do, by entry point (``lifecycle_check``'s
# ``advice``), formatted with ``dataset_id``, ``kind`` (the notice) and ``becomes``. Only
# a PATCH (and the web form) can carry an override reason; a declarations file cannot.
ADVICE_API = (
    "announce one (POST /api/v1/datasets/{dataset_id}/change-notices), or give an override_reason"
)
ADVICE_WEB = (
    "announce one (POST /api/v1/datasets/{dataset_id}/change-notices), or fill in the "
    "lifecycle override reason"
)


def lifecycle_check(
    *,
    dataset: Dataset,
    changes: dict[str, Any],
    override_reason: str,
    now: datetime,
    advice: str = ADVICE_API,
) -> str:
    """Check a change of ``lifecycle`` or ``sunset_at`` of ``dataset`` (locked, as it is
    before ``changes``) against the lifecycle rules.

    Rules:
        - deprecated needs a ``sunset_at`` at least ``change_notice_days`` after ``now``
          (checked whenever the dataset becomes deprecated or its sunset moves);
        - becoming deprecated needs a ``deprecation`` change notice in effect, and
          becoming retired a ``retirement`` one (or, when deprecated, its sunset passed):
          so consumers had the notice period. ``override_reason`` overrides this rule
          (not the sunset rule); the caller audits it.

    Args:
        changes: the fields being changed (``lifecycle``, ``sunset_at``, others ignored).
        override_reason: a written reason to change the lifecycle without that notice.
        now: aware UTC.
        advice: what the caller's entry point lets a person do about a missing notice
            (``ADVICE_API``, ``ADVICE_WEB``, ``declarations.LIFECYCLE_ADVICE``...), a
            format string with ``{dataset_id}``, ``{kind}`` and ``{becomes}``.

    Returns:
        The override reason used, or ``""`` when none was needed.

    Raises:
        ValidationProblem (400: deprecated without ``sunset_at``, ``override_reason``
        without a lifecycle change it could override), SunsetTooSoon (422, with
        ``earliest_sunset_at``), LifecycleNoticeRequired (409).
    """
    lifecycle = changes.get("lifecycle", dataset.lifecycle)
    sunset_at = changes.get("sunset_at", dataset.sunset_at)
    becomes = lifecycle if lifecycle != dataset.lifecycle else None
    reason = override_reason.strip()
    if reason and becomes not in _LIFECYCLE_NOTICE:
        raise ValidationProblem(
            "override_reason applies only to a change of lifecycle to deprecated or retired",
            errors=[
                FieldError(
                    "override_reason",
                    "only with a lifecycle change to deprecated or retired",
                    "lifecycle_change",
                )
            ],
        )
    if lifecycle == Dataset.Lifecycle.DEPRECATED and (becomes or sunset_at != dataset.sunset_at):
        _check_sunset(dataset, sunset_at, now=now)
    if becomes not in _LIFECYCLE_NOTICE:
        return ""
    kind = _LIFECYCLE_NOTICE[becomes]
    in_effect = any(
        n.in_effect(now) for n in ChangeNotice.objects.filter(dataset=dataset, kind=kind)
    )
    sunset_passed = (
        becomes == Dataset.Lifecycle.RETIRED
        and dataset.lifecycle == Dataset.Lifecycle.DEPRECATED
        and dataset.sunset_at is not None
        and dataset.sunset_at <= now
    )
    if in_effect or sunset_passed:
        return ""
    if reason:
        return reason
    raise errors.LifecycleNoticeRequired(
        f"{dataset} becomes {becomes} only after a {kind} change notice has taken effect "
        f"(announced at least {dataset.change_notice_days} days ahead); "
        + advice.format(dataset_id=dataset.pk, kind=kind, becomes=becomes),
        errors=[FieldError("lifecycle", f"needs a {kind} notice in effect", "change_notice")],
        extra={"rule": "change_notice", "notice_kind": kind},
    )


def _check_sunset(dataset: Dataset, sunset_at: datetime | None, *, now: datetime) -> None:
    if sunset_at is None:
        raise ValidationProblem(
            "a deprecated dataset needs a sunset_at",
            errors=[
                FieldError("sunset_at", "required when deprecated", "required_when_deprecated")
            ],
        )
    days = dataset.change_notice_days
    earliest = notice_periods.earliest_effective_at(now, days)
    if sunset_at < earliest:
        raise errors.SunsetTooSoon(
            f"{dataset} requires {days} days' notice: sunset_at must be at or after "
            f"{iso(earliest)}",
            errors=[
                FieldError(
                    "sunset_at", f"must be at or after {iso(earliest)}", "change_notice_days"
                )
            ],
            extra={
                "rule": "change_notice_days",
                "change_notice_days": days,
                "earliest_sunset_at": iso(earliest),
            },
        )
