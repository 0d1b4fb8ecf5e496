"""Writes for subscriptions: declaring one (with its webhook endpoint, and catching up on
recent notifications when asked), deleting one, and the subscriptions a verified
lineage job event declares."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from problems import FieldError, ValidationProblem, invalid_choice
from schedules import cron_checks
from schedules.periods import validate_timezone

from .. import doorbell, endpoint_actions, errors, need_by, notices, selectors
from ..actors import Actor
from ..event_types import subscriber_event_type_names
from ..models import (
    Claim,
    Dataset,
    Delivery,
    Endpoint,
    Notification,
    Subscription,
    SubscriptionEndpoint,
    Team,
)
from ..notices import iso


@dataclass(frozen=True)
class Caution:
    """Something a caller should know about a request that succeeded (``code`` stable
    snake_case, ``detail`` for people, ``sunset_at`` when it is about a sunset, ``field``
    the input field it is about, if one)."""

    code: str
    detail: str
    sunset_at: datetime | None = None
    field: str | None = None


@dataclass(frozen=True)
class SubscriptionResult:
    """``subscription_create``'s answer; ``endpoint_secret`` is set only when the webhook
    endpoint was new: it is the one time its signing secret is shown. ``warnings``: e.g.
    the dataset is deprecated."""

    subscription: Subscription
    created: bool
    endpoint_secret: str | None = None
    warnings: tuple[Caution, ...] = ()


@transaction.atomic
def subscription_create(
    *,
    actor: Actor,
    dataset: Dataset,
    job_namespace: str = "",
    job_name: str = "",
    endpoint_url: str | None = None,
    event_types: list[str] | None = None,
    partition_pattern: str = "",
    newest_only: bool = False,
    need_by_cron: str = "",
    need_by_timezone: str = "UTC",
    since: datetime | None = None,
    now: datetime | None = None,
) -> SubscriptionResult:
    """Declare that the actor's team (optionally one of its jobs) reads ``dataset``.

    Declaring the same (team, dataset, job) again with one of its endpoints' URLs (or
    none, or ``""``) updates its filters and answers as before (``created`` False). It
    never moves the subscription to another URL, nor adds one: that is a
    ``SubscriptionExists`` (more endpoints are added with
    ``subscription_endpoints.subscription_endpoint_add``). A subscription without an
    endpoint (one a lineage job event declared) gets the one given.

    Args:
        endpoint_url: webhook URL to notify, reused when the team already has it; ``""``
            removes every endpoint of the subscription; None keeps what an earlier
            declaration set.
        event_types: notification types to receive; empty or None: all but the opt-in
            ones (``notices.OPT_IN_TYPES``: ``dataset.unusually_late``).
        partition_pattern: fnmatch pattern on partition keys (``2026-*``); empty: all.
        newest_only: tell no backfills, nor restatements of partitions older than the
            newest ready one (``notices.matching_endpoints``), for consumers that read the
            latest data only.
        need_by_cron, need_by_timezone: when the team needs each partition (``need_by``):
            a cron checked as an SLA cron is, in an IANA zone; blank: no need-by. A
            partition not ready then is told to this subscription alone as
            ``dataset.late`` (``need_by_judging``).
        since: aware instant, at most ``MAX_SINCE_DAYS`` back: notifications about the
            dataset from then on are delivered too (a new consumer catching up). Without
            it a subscription receives what happens from its creation on, never history.
        now: aware UTC instant (default: the current time).

    Returns:
        A ``SubscriptionResult``; a new webhook endpoint gets a signing secret, returned
        once in ``endpoint_secret``; subscribing to a deprecated dataset succeeds with a
        ``dataset_deprecated`` warning naming its sunset; a need-by cron's warnings
        (``cron_checks.field_warnings``) and ``need_by_before_sla`` (``need_by_cautions``)
        come in ``warnings`` too.

    Raises:
        ValidationProblem: ``need_by_cron`` is not a cron or never fires, or is set on an
            unpartitioned dataset; ``need_by_timezone`` is not an IANA zone; an
            ``event_types`` entry is not sent to subscribers (400).
        ValidationProblem: ``endpoint_url``'s host is an IP address the outbound guard
            blocks (400, rule ``public_address``; ``endpoint_actions.webhook_address_refusal``:
            a host name is not resolved here, delivery checks it at connect time).
        DatasetRetired: the dataset is retired (409).
        JobNamespaceOfAnotherTeam: ``job_namespace`` is claimed by another team (403).
        SubscriptionExists: the team already declared this dataset and job with other
            endpoint URLs (409; ``existing`` gives its ``id``, ``endpoint_url`` and
            ``endpoints_path``).
    """
    now = now or timezone.now()
    _validate_event_types(event_types)
    _validate_need_by(dataset, need_by_cron, need_by_timezone)
    refusal = endpoint_actions.webhook_address_refusal(endpoint_url) if endpoint_url else None
    if refusal:
        raise ValidationProblem(
            refusal, errors=[FieldError("endpoint_url", refusal, "public_address")]
        )
    if dataset.lifecycle == Dataset.Lifecycle.RETIRED:
        raise errors.DatasetRetired(
            f"{dataset} is retired; it can no longer be subscribed to",
            errors=[FieldError("dataset_id", "the dataset is retired", "lifecycle_retired")],
        )
    if job_namespace:
        owner = selectors.claimants(kind=Claim.Kind.JOB_NAMESPACE, patterns=[job_namespace]).get(
            job_namespace
        )
        if owner is not None and owner.pk != actor.team.pk:
            # Declaring another team's job would put words in its mouth.
            raise errors.JobNamespaceOfAnotherTeam(
                f"job namespace {job_namespace!r} is claimed by team {owner.slug}; a "
                "subscription names one of your own team's jobs",
                errors=[FieldError("job_namespace", "claimed by another team", "claimed")],
            )
    warnings = []
    if dataset.lifecycle == Dataset.Lifecycle.DEPRECATED:
        sunset = f" and retires at {iso(dataset.sunset_at)}" if dataset.sunset_at else ""
        warnings.append(
            Caution(
                code="dataset_deprecated",
                detail=f"{dataset} is deprecated{sunset}; plan to read its successor",
                sunset_at=dataset.sunset_at,
            )
        )
    defaults: dict[str, Any] = {
        "event_types": sorted(set(event_types or [])),
        "partition_pattern": partition_pattern,
        "newest_only": newest_only,
        "need_by_cron": need_by_cron,
        "need_by_timezone": need_by_timezone,
    }
    existing = _locked_declaration(actor.team, dataset, job_namespace, job_name)
    new_secret = None
    if endpoint_url == "":  # no endpoint: the declaration stays, told nothing
        defaults["endpoint"] = None
        if existing is not None:
            SubscriptionEndpoint.objects.filter(subscription=existing).delete()
    elif endpoint_url and (existing is None or endpoint_url not in _endpoint_urls(existing)):
        _refuse_a_move(existing, endpoint_url)
        defaults["endpoint"], new_secret = webhook_endpoint_for(
            team=actor.team, url=endpoint_url, now=now
        )
    # None, or a URL it already delivers to: its endpoints stay as they are.
    subscription, created = Subscription.objects.update_or_create(
        team=actor.team,
        dataset=dataset,
        job_namespace=job_namespace,
        job_name=job_name,
        defaults=defaults,
    )
    _schedule_need_by(subscription, now=now)
    endpoint_ids = notices.subscription_endpoint_ids(subscription)
    if since is not None and endpoint_ids:
        catch_up(subscription, endpoint_ids, since=since, now=now)
    warnings += need_by_cautions(subscription, now=now)
    return SubscriptionResult(subscription, created, new_secret, tuple(warnings))


def _validate_event_types(event_types: list[str] | None) -> None:
    """Refuse a type no subscription is ever sent (an owner notice, a watchdog event):
    such a subscription would silently receive nothing of it (rule ``invalid_choice``,
    listing the types a subscription can receive)."""
    allowed = subscriber_event_type_names()
    problems = [
        invalid_choice(f"event_types.{index}", value, allowed)
        for index, value in enumerate(event_types or [])
        if value not in allowed
    ]
    if problems:
        raise ValidationProblem(problems[0].detail, errors=problems)


def _validate_need_by(dataset: Dataset, cron: str | None, time_zone: str | None) -> None:
    """The need-by fields' rules, those of an SLA's cron and zone (the same checks and
    problem shapes): a cron ``check_cron`` accepts, an IANA zone; and a need-by only on
    a partitioned dataset (a need-by is per partition)."""
    problems: list[FieldError] = []
    if time_zone is not None:
        try:
            validate_timezone(time_zone)
        except ValueError as exc:
            problems.append(FieldError("need_by_timezone", str(exc), "iana_time_zone"))
    if cron:
        cron_problem = cron_checks.field_problem("need_by_cron", cron)
        if cron_problem is not None:
            problems.append(cron_problem)
        elif dataset.partitioning == Dataset.Partitioning.NONE:
            problems.append(
                FieldError(
                    "need_by_cron",
                    f"{dataset} is not partitioned: a need-by is per partition",
                    "partitioned_dataset",
                )
            )
    if problems:
        raise ValidationProblem.of("Some subscription fields are not valid.", problems)


def _schedule_need_by(subscription: Subscription, *, now: datetime) -> None:
    """Store the first need-by deadline to judge (``need_by.schedule``) and how far it
    falls before the SLA (``need_by.gap_seconds``). A deadline the previous need-by had
    not judged yet is still judged, by the new rule, as on an SLA change: a redeclaration
    never skips one."""
    before = (subscription.need_by_next_at, subscription.need_by_gap_seconds)
    need_by.schedule(
        subscription, subscription.dataset, now=now, owed_from=subscription.need_by_next_at
    )
    subscription.need_by_gap_seconds = need_by.gap_seconds(
        subscription, subscription.dataset, now=now
    )
    if (subscription.need_by_next_at, subscription.need_by_gap_seconds) != before:
        subscription.save(update_fields=["need_by_next_at", "need_by_gap_seconds"])


def subscription_need_by_gaps_refresh(*, dataset: Dataset, now: datetime) -> int:
    """Recompute ``need_by_gap_seconds`` of the dataset's subscriptions with a need-by,
    after its SLA or partitioning changed (``dataset_update``); call inside its
    transaction. Their need-by deadlines do not move: those depend on the need-by alone.

    Returns:
        How many subscriptions changed.
    """
    changed = []
    for subscription in Subscription.objects.filter(dataset=dataset).exclude(need_by_cron=""):
        gap = need_by.gap_seconds(subscription, dataset, now=now)
        if gap != subscription.need_by_gap_seconds:
            subscription.need_by_gap_seconds = gap
            changed.append(subscription)
    Subscription.objects.bulk_update(changed, ["need_by_gap_seconds"])
    return len(changed)


def need_by_cautions(subscription: Subscription, *, now: datetime) -> list[Caution]:
    """What a subscriber should know about its need-by: the cron's warnings (as an SLA
    cron's), and ``need_by_before_sla`` when the need-by of a period comes before the
    dataset's SLA deadline for it (``need_by.compare``, over the next deadlines)."""
    cautions = [
        Caution(code=w.code, detail=w.message, field=w.field)
        for w in cron_checks.field_warnings("need_by_cron", subscription.need_by_cron)
    ]
    earliest = need_by.earliest_need(need_by.compare(subscription, subscription.dataset, now=now))
    if earliest is not None:
        cautions.append(
            Caution(
                code="need_by_before_sla",
                detail=need_by.before_sla_detail(earliest, subscription.dataset),
                field="need_by_cron",
            )
        )
    return cautions


def webhook_endpoint_for(*, team: Team, url: str, now: datetime) -> tuple[Endpoint, str | None]:
    """The team's webhook endpoint at ``url``, created (with a signing secret) when the
    team has none there yet. Call inside the caller's transaction.

    Returns:
        ``(endpoint, secret)``: ``secret`` is the new endpoint's signing secret (the one
        time it is shown), None when the endpoint existed.
    """
    endpoint, created = Endpoint.objects.get_or_create(
        team=team, kind=Endpoint.Kind.WEBHOOK, url=url
    )
    secret = (
        endpoint_actions.endpoint_set_new_secret(endpoint=endpoint, now=now) if created else None
    )
    return endpoint, secret


def _locked_declaration(
    team: Team, dataset: Dataset, job_namespace: str, job_name: str
) -> Subscription | None:
    """The team's subscription to ``dataset`` (and job), locked, so a concurrent
    declaration with another URL cannot slip in between the checks and the write; None
    when there is none yet."""
    return (
        Subscription.objects.select_for_update(of=("self",))
        .select_related("endpoint")
        .filter(team=team, dataset=dataset, job_namespace=job_namespace, job_name=job_name)
        .first()
    )


def _endpoint_urls(subscription: Subscription) -> list[str]:
    """The URLs of every endpoint ``subscription`` delivers to, its first one first."""
    urls = [subscription.endpoint.url] if subscription.endpoint is not None else []
    others = SubscriptionEndpoint.objects.filter(subscription=subscription).order_by("pk")
    return urls + list(others.values_list("endpoint__url", flat=True))


def subscription_locked(actor: Actor, subscription_id: int) -> Subscription:
    """The actor's team's subscription ``subscription_id`` (any integer, as a URL gives it),
    locked (``SELECT ... FOR UPDATE`` of its row alone) with its team, dataset and first
    endpoint; call inside a transaction.

    Raises:
        SubscriptionNotFound: no such subscription of the team, or an id out of range (404).
    """
    subscription = None
    if 0 < subscription_id <= 2**63 - 1:
        subscription = (
            Subscription.objects.select_for_update(of=("self",))
            .select_related("team", "dataset", "endpoint")
            .filter(pk=subscription_id, team=actor.team)
            .first()
        )
    if subscription is None:
        raise errors.SubscriptionNotFound(f"your team has no subscription {subscription_id}")
    return subscription


def _refuse_a_move(existing: Subscription | None, endpoint_url: str) -> None:
    """Raise ``SubscriptionExists`` when ``existing`` (the declaration being made again,
    locked) delivers to endpoints none of which is at ``endpoint_url``: a declaration
    adds no endpoint and moves none; the sub-resource does (``subscription_endpoints``)."""
    if existing is None or existing.endpoint is None:
        return
    job = f" for job {existing.job_namespace}/{existing.job_name}" if existing.job_name else ""
    path = f"/api/v1/subscriptions/{existing.pk}/endpoints"
    raise errors.SubscriptionExists(
        f"your team's subscription {existing.pk} to {existing.dataset}{job} sends to "
        f"{existing.endpoint.url}; a declaration does not move it to another URL. To "
        f"deliver to {endpoint_url} as well, add it as another endpoint (POST {path}); to "
        "move the subscription, add the new one and remove the old one "
        f"(DELETE {path}/{existing.endpoint.pk})",
        errors=[
            FieldError(
                "endpoint_url",
                f"subscription {existing.pk} sends to {existing.endpoint.url}; add another "
                f"endpoint with POST {path}",
                "exists",
            )
        ],
        extra={
            "existing": {
                "id": existing.pk,
                "endpoint_url": existing.endpoint.url,
                "endpoints_path": path,
            }
        },
    )


MAX_SINCE_DAYS = 30


# Notifications about a dataset that are not for its subscribers: the watchdog's monitor
# definitions (they hold the pipeline's ping key, a secret) and pings; and change-notice
# reminders, which went to the consumer teams that had not acknowledged at the time.
NOT_FOR_SUBSCRIBERS = (
    Notification.Type.WATCHDOG_MONITOR,
    Notification.Type.WATCHDOG_PING,
    Notification.Type.CHANGE_NOTICE_REMINDER,
)


def catch_up(
    subscription: Subscription, endpoint_ids: set[int], *, since: datetime, now: datetime
) -> int:
    """Deliver the dataset's notifications since ``since`` that match the subscription's
    filters to each of ``endpoint_ids`` (each at most once per endpoint: the outbox's
    unique key); never those ``NOT_FOR_SUBSCRIBERS``, nor old news for a newest-only one
    (``_old_news``). Returns how many deliveries it wrote (or found written)."""
    earliest = now - timedelta(days=MAX_SINCE_DAYS)
    if since < earliest:
        raise ValidationProblem(
            f"since ({iso(since)}) may be at most {MAX_SINCE_DAYS} days back: at or after "
            f"{iso(earliest)}",
            errors=[
                FieldError(
                    "since",
                    f"{iso(since)} is more than {MAX_SINCE_DAYS} days back",
                    "max_age",
                )
            ],
        )
    if since > now:
        raise ValidationProblem(
            f"since ({iso(since)}) is later than now ({iso(now)}): there is nothing to catch "
            "up on yet",
            errors=[FieldError("since", f"{iso(since)} is later than {iso(now)}", "not_in_future")],
        )
    history = (
        Notification.objects.filter(dataset=subscription.dataset, created_at__gte=since)
        .exclude(type__in=NOT_FOR_SUBSCRIBERS)
        .order_by("created_at")
    )
    newest = None
    if subscription.newest_only:
        latest = selectors.partition_latest_ready(dataset=subscription.dataset, now=now)
        newest = latest.key if latest is not None else None
    rows = [
        Delivery(notification=n, endpoint_id=endpoint_id, next_attempt_at=now)
        for n in history
        if notices.wants(subscription.event_types, n.type)
        and (
            not subscription.partition_pattern
            or "partition" not in n.payload["data"]  # about the whole dataset
            or fnmatch.fnmatchcase(n.payload["data"]["partition"], subscription.partition_pattern)
        )
        and not (subscription.newest_only and _old_news(n, newest))
        # Lateness told at another subscription's need-by was for that team alone.
        and n.payload["data"].get("judged_at") != "need_by"
        for endpoint_id in sorted(endpoint_ids)
    ]
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    if rows:
        doorbell.ring_deliveries()
    return len(rows)


def _old_news(notification: Notification, newest: str | None) -> bool:
    """Whether a newest-only subscription catching up is not told ``notification``: a
    backfill, or a restatement of a partition other than ``newest`` (the newest ready
    partition's key now; None: there is none)."""
    data = notification.payload["data"]
    if notification.type == Notification.Type.PARTITION_READY:
        return bool(data.get("backfill"))
    if notification.type == Notification.Type.PARTITION_RESTATED:
        return data.get("partition") != newest
    return False


@transaction.atomic
def subscription_update(
    *,
    actor: Actor,
    subscription_id: int,
    event_types: list[str] | None = None,
    partition_pattern: str | None = None,
    newest_only: bool | None = None,
    need_by_cron: str | None = None,
    need_by_timezone: str | None = None,
    now: datetime | None = None,
) -> SubscriptionResult:
    """Change the filters or need-by of one of the actor's team's subscriptions; a field
    given as None stays as it is. Its endpoint never changes here (see
    ``subscription_create``).

    Args:
        event_types: notification types to receive; empty: all but the opt-in ones
            (``notices.OPT_IN_TYPES``).
        partition_pattern: fnmatch pattern on partition keys; empty: all.
        newest_only: as ``subscription_create``'s; applies to what is written from now on.
        need_by_cron, need_by_timezone: as ``subscription_create``'s; ``""`` removes the
            need-by.
        now: aware UTC instant (default: the current time).

    Returns:
        A ``SubscriptionResult`` (``created`` False) with the subscription as saved and
        its need-by's ``warnings`` (``need_by_cautions``).

    Raises:
        SubscriptionNotFound: no such subscription of this team (404).
        ValidationProblem: as ``subscription_create``'s need-by and event-type rules
            (400).
    """
    now = now or timezone.now()
    subscription = subscription_locked(actor, subscription_id)
    changes = {
        "event_types": sorted(set(event_types)) if event_types is not None else None,
        "partition_pattern": partition_pattern,
        "newest_only": newest_only,
        "need_by_cron": need_by_cron,
        "need_by_timezone": need_by_timezone,
    }
    _validate_event_types(event_types)
    _validate_need_by(subscription.dataset, need_by_cron, need_by_timezone)
    changed = [name for name, value in changes.items() if value is not None]
    for name in changed:
        setattr(subscription, name, changes[name])
    if changed:
        subscription.full_clean()
        subscription.save(update_fields=changed)
    if need_by_cron is not None or need_by_timezone is not None:
        _schedule_need_by(subscription, now=now)
    return SubscriptionResult(
        subscription, False, warnings=tuple(need_by_cautions(subscription, now=now))
    )


@transaction.atomic
def subscription_delete(*, actor: Actor, subscription_id: int) -> None:
    """Delete one of the actor's team's subscriptions.

    Raises:
        SubscriptionNotFound: no such subscription of this team (404; another team's
            subscriptions are not revealed).
    """
    deleted = 0
    if 0 < subscription_id <= 2**63 - 1:
        deleted, _ = Subscription.objects.filter(pk=subscription_id, team=actor.team).delete()
    if not deleted:
        raise errors.SubscriptionNotFound(f"your team has no subscription {subscription_id}")


def subscription_declare_for_job(
    *, team: Team, job_namespace: str, job_name: str, identities: list[tuple[str, str]]
) -> int:
    """Declare that ``team``'s job reads each registered dataset among ``identities``: a
    verified OpenLineage JobEvent's inputs. Creates a subscription of the team naming the
    job, with no endpoint and no filters, for each registered dataset it lacks one for; an
    existing one (its endpoint and filters) is left as it is. Identities the catalog does
    not know are skipped. Call inside the caller's transaction; safe under concurrency
    (an insert that loses a race is ignored).

    Args:
        team: the job's verified owner (it claims the job namespace).
        job_namespace, job_name: the OpenLineage job identity, as received.
        identities: ``(namespace, name)`` dataset identities, already normalised.

    Returns:
        How many subscriptions it created (0 when all existed; one that a concurrent
        declaration inserted first is counted too).
    """
    if not identities:
        return 0
    match = models.Q()
    for namespace, name in identities:
        match |= models.Q(namespace=namespace, name=name)
    declared = Subscription.objects.filter(
        team=team, dataset=models.OuterRef("pk"), job_namespace=job_namespace, job_name=job_name
    )
    wanted = Dataset.objects.filter(match).filter(~models.Exists(declared))
    rows = [
        Subscription(team=team, dataset=dataset, job_namespace=job_namespace, job_name=job_name)
        for dataset in wanted.order_by("pk")
    ]
    Subscription.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)
