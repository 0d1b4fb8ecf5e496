"""A month of the demo's history, written through the catalog's own services at the
instants it happened (``clock.at``): registrations, publishes, the poll's sweeps of the
demo lake, restatements, subscriptions, change notices, and between them the SLA
judgements and change-notice steps beat would have run. Late incidents, ``dataset.late``
and ``dataset.recovered``, ``partition.restated``, poll finds told as missed events and
the watchdog's feed are therefore the services' own doing, not written by hand.

The one shortcut: the hourly dataset's partitions older than ``BULK_BEFORE`` (a month of
hours, all found on time by the poll) are inserted in bulk, as the poll's service would
have recorded them, to keep ``load_demo`` within seconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction

from .. import change_notices, doorbell, freshness_state, polling, restatements
from ..actors import Actor
from ..models import ApiKey, Claim, Dataset, Team
from ..services import datasets as dataset_services
from ..services import ownership, publishing, subscriptions
from ..services import teams as team_services
from . import bulk, clock, lake, outbox, world
from .landings import (
    FAILED,
    INCOMPLETE,
    LANDED,
    LOST_EVENT,
    Landing,
    producer_landings,
    snapshot_times,
)
from .timeline import Timeline

# Hourly partitions older than this are inserted in bulk (see the module's docstring).
# Hourly partitions older than this are inserted in bulk (see the module's docstring):
# older than any subscription to them, so nobody was to be told.
BULK_BEFORE = timedelta(hours=26)
PUBLISH_AFTER = timedelta(seconds=6)  # a producer's last task publishes after its write
PRODUCER_KEYS = {"orders": "airflow", "analytics": "airflow", "finance": "dbt"}


@dataclass(frozen=True)
class ProducerRun:
    """One run of a dataset's producer: what lineage and the watchdog's pipeline monitor
    saw of it. ``outcome``: ``success`` or ``fail``."""

    dataset: world.DatasetSpec
    key: str
    started_at: datetime
    ended_at: datetime
    outcome: str


@dataclass
class History:
    """What ``seed_history`` wrote: the rows to build on, and the producers' runs."""

    now: datetime
    teams: dict[str, Team]
    keys: dict[str, ApiKey]
    datasets: dict[tuple[str, str], Dataset]
    landings: dict[tuple[str, str], list[Landing]] = field(default_factory=dict)
    runs: list[ProducerRun] = field(default_factory=list)

    def dataset(self, spec: world.DatasetSpec) -> Dataset:
        return self.datasets[spec.identity]


def history_start(now: datetime) -> datetime:
    """When the demo's datasets were registered: ``HISTORY_DAYS`` before ``now``."""
    return (now - timedelta(days=world.HISTORY_DAYS)).replace(second=0, microsecond=0)


def seed_history(*, now: datetime, seed: int, demo_hook_url: str) -> History:
    """Write the demo's month up to ``now``, in one transaction, ringing no doorbell
    (what is left due, the workers' first sweep finds).

    Args:
        now: aware UTC instant the history ends at (``load_demo``: the current time).
        seed: the story's random seed (jitter of landing times, retry delays, ids).
        demo_hook_url: where the demo's webhook receiver answers (``/demo/hooks/<team>``
            on this server, by team: ``{team}`` is replaced by the team's slug).

    Returns:
        The ``History``. Deterministic given ``now`` and ``seed`` (row ids aside).
    """
    rng = random.Random(seed)
    with doorbell.silenced(), transaction.atomic():
        history = _register(now=now, rng=rng)
        timeline = Timeline(now=now)
        _subscriptions(history, timeline, demo_hook_url=demo_hook_url)
        for spec in world.DATASETS:
            if spec.producer is not None:
                _partitions(history, timeline, spec, rng=random.Random(f"{seed}:{spec.name}"))
            elif spec.snapshots:
                _snapshots(history, timeline, spec)
        _change_notices(history, timeline)
        _restatement(history, timeline)
        timeline.play()
        outbox.settle(now=now, rng=rng)
    return history


def _register(*, now: datetime, rng: random.Random) -> History:
    """Teams, their producers' keys and job namespace claims, and the datasets, in the
    hour before the history starts."""
    start = history_start(now)
    teams, keys, datasets = {}, {}, {}
    with clock.at(start - timedelta(hours=2)):
        for spec in world.TEAMS:
            team = Team.objects.filter(slug=spec.slug).first() or team_services.team_create(
                slug=spec.slug,
                name=spec.name,
                contact_email=spec.contact_email,
                paging_routing_key=spec.paging_routing_key,
            )
            teams[spec.slug] = team
            keys[spec.slug], _ = team_services.api_key_create(
                team=team,
                name=PRODUCER_KEYS[spec.slug],
                scopes=[ApiKey.Scope.PUBLISH, ApiKey.Scope.LINEAGE, ApiKey.Scope.READ],
            )
            ownership.claim_create(
                actor=Actor(team=team, api_key=keys[spec.slug]),
                kind=Claim.Kind.JOB_NAMESPACE,
                pattern=spec.job_namespace,
            )
    for index, spec in enumerate(world.DATASETS):
        with clock.at(start - timedelta(minutes=60 - 4 * index)):
            datasets[spec.identity] = dataset_services.dataset_register(
                actor=Actor(team=teams[spec.team], api_key=keys[spec.team]),
                namespace=spec.namespace,
                name=spec.name,
                description=spec.description,
                **spec.fields,
            )
    return History(now=now, teams=teams, keys=keys, datasets=datasets)


def _actor(history: History, slug: str) -> Actor:
    return Actor(team=history.teams[slug], api_key=history.keys[slug])


def _subscriptions(history: History, timeline: Timeline, *, demo_hook_url: str) -> None:
    start = history_start(history.now)
    for index, spec in enumerate(world.SUBSCRIPTIONS):
        url = spec.endpoint
        if url == world.DEMO_HOOK:
            url = demo_hook_url.format(team=spec.team)
        when = history.now - spec.age if spec.age else start - timedelta(minutes=20 - 3 * index)

        def subscribe(at, spec=spec, url=url):
            subscriptions.subscription_create(
                actor=Actor(team=history.teams[spec.team], username="demo"),
                dataset=history.dataset(spec.dataset),
                job_namespace=spec.job_namespace,
                job_name=spec.job_name,
                endpoint_url=url or None,
                now=at,
            )

        timeline.at(when, subscribe)


def _partitions(history, timeline, spec: world.DatasetSpec, *, rng: random.Random) -> None:
    """Schedule every landing of a partitioned dataset: the producer's write (files in the
    lake, for a polled dataset), its publish or the poll's find, and reruns."""
    dataset = history.dataset(spec)
    landings = producer_landings(
        spec.producer,
        sla=freshness_state.sla_of(dataset),
        partitioning=dataset.partitioning,
        partition_timezone=dataset.partition_timezone,
        registered_at=dataset.created_at,
        now=history.now,
        rng=rng,
    )
    history.landings[spec.identity] = landings
    in_bulk = _bulk_part(spec.producer, landings, until=history.now - BULK_BEFORE)
    bulk.found_by_poll(dataset, in_bulk)
    bulk.judged_through(dataset, in_bulk)
    bulk_keys = {landing.key for landing in in_bulk}
    actor = _actor(history, spec.team)
    for landing in landings:
        started = landing.lands_at - timedelta(minutes=rng.uniform(8, 25))
        outcome = "fail" if landing.kind == FAILED else "success"
        history.runs.append(ProducerRun(spec, landing.key, started, landing.lands_at, outcome))
        if landing.key in bulk_keys or landing.kind == FAILED:
            continue
        if dataset.poll_group_id is not None:
            _write_files(timeline, dataset, landing, rng=rng)
        if spec.producer.by_poll or landing.kind == LOST_EVENT:
            _found_by_the_poll(timeline, dataset, landing, rng=rng)
        else:
            timeline.at(
                landing.lands_at + PUBLISH_AFTER,
                lambda at, key=landing.key: _publish(actor, dataset, key, now=at),
            )
        if landing.restated and landing.restated[1] <= history.now:
            version, when = landing.restated
            timeline.at(
                when,
                lambda at, key=landing.key, version=version: _publish(
                    actor, dataset, key, version=version, code_version="git:9c1d7e2", now=at
                ),
            )


def _bulk_part(producer: world.Producer, landings: list[Landing], *, until) -> list[Landing]:
    """The oldest landings of a poll-only dataset, all found on time before ``until``."""
    if not producer.by_poll:
        return []
    found = []
    for landing in landings:
        if landing.kind != LANDED or landing.ready_at is None or landing.ready_at >= until:
            break
        found.append(landing)
    return found


def _write_files(timeline: Timeline, dataset: Dataset, landing: Landing, *, rng) -> None:
    """The producer writes the partition's files when its run finishes; an incomplete
    manifest's last file comes later (``_found_by_the_poll``)."""
    files = 3 if landing.kind == INCOMPLETE else rng.randint(2, 4)
    written = files - int(landing.kind == INCOMPLETE)
    timeline.at(
        landing.lands_at,
        lambda at: lake.write_partition(dataset, landing.key, files=written, expected_files=files),
    )


def _found_by_the_poll(timeline: Timeline, dataset: Dataset, landing: Landing, *, rng) -> None:
    """The poll's sweeps that find the partition: one when it is ready; for an incomplete
    manifest, one that sees it incomplete first, and its last file landing late."""
    if landing.kind == INCOMPLETE:
        first_look = landing.lands_at + timedelta(seconds=rng.uniform(20, 80))
        timeline.at(first_look, lambda at: polling.sweep_dataset(dataset, now=at, full=False))
        if landing.ready_at is not None:
            last_file = landing.ready_at - timedelta(seconds=rng.uniform(20, 50))
            timeline.at(last_file, lambda at: lake.add_file(dataset, landing.key, 2))
    if landing.ready_at is not None:
        timeline.at(landing.ready_at, lambda at: polling.sweep_dataset(dataset, now=at, full=False))


def _publish(actor: Actor, dataset: Dataset, key: str, *, now: datetime, **fields) -> None:
    publishing.readiness_publish(
        actor=actor,
        namespace=dataset.namespace,
        name=dataset.name,
        partition=key,
        now=now,
        **fields,
    )


def _snapshots(history: History, timeline: Timeline, spec: world.DatasetSpec) -> None:
    """An unpartitioned dataset's weekly snapshots, each a new version."""
    dataset = history.dataset(spec)
    actor = _actor(history, spec.team)
    stops = history.now - world.EXPORT_DEPRECATION_AGE + timedelta(days=15)
    until = stops if spec is world.ORDERS_EXPORT else history.now
    for at in snapshot_times(spec.snapshots, since=dataset.created_at, until=until):
        year, week, _ = at.isocalendar()
        timeline.at(
            at,
            lambda at, version=f"{year}-W{week:02}": _publish(
                actor, dataset, "", version=version, now=at
            ),
        )


def _change_notices(history: History, timeline: Timeline) -> None:
    """Finance's notice awaiting analytics' acknowledgement; the old export's deprecation,
    in effect, and the export deprecated until its sunset."""
    revenue = history.dataset(world.DAILY_REVENUE)
    export = history.dataset(world.ORDERS_EXPORT)

    def announce_revenue(at):
        change_notices.change_notice_announce(
            actor=Actor(team=history.teams["finance"], username="fiona"),
            dataset=revenue,
            effective_at=at + world.REVENUE_NOTICE_EFFECTIVE_IN + world.REVENUE_NOTICE_AGE,
            now=at,
            **world.REVENUE_NOTICE,
        )

    def announce_deprecation(at):
        change_notices.change_notice_announce(
            actor=Actor(team=history.teams["orders"], username="omar"),
            dataset=export,
            effective_at=at + timedelta(days=15),
            now=at,
            **world.EXPORT_DEPRECATION,
        )

    def deprecate(at):
        dataset_services.dataset_update(
            actor=Actor(team=history.teams["orders"], username="omar"),
            dataset=export,
            lifecycle=Dataset.Lifecycle.DEPRECATED,
            sunset_at=at + timedelta(days=30),
        )

    timeline.at(history.now - world.REVENUE_NOTICE_AGE, announce_revenue, reschedules=True)
    announced = history.now - world.EXPORT_DEPRECATION_AGE
    timeline.at(announced, announce_deprecation, reschedules=True)
    timeline.at(announced + timedelta(days=16), deprecate, reschedules=True)


def _restatement(history: History, timeline: Timeline) -> None:
    """Analytics restates a week of its rollup after a logic fix and promotes it."""
    spec = world.ROLLUP_RESTATEMENT
    dataset = history.dataset(world.ORDERS_ROLLUP)
    by_age = {landing.age: landing for landing in history.landings[world.ORDERS_ROLLUP.identity]}
    if not all(age in by_age for age in range(spec["last_age"], spec["first_age"] + 1)):
        return  # a history too short to hold it
    keys = [by_age[age].key for age in range(spec["first_age"], spec["last_age"] - 1, -1)]
    opened_at = by_age[spec["opened_age"]].lands_at + timedelta(hours=2)
    actor = _actor(history, "analytics")
    state = {}

    def open_it(at):
        state["restatement"] = restatements.restatement_open(
            actor=actor,
            dataset=dataset,
            version=spec["version"],
            first_partition=keys[0],
            last_partition=keys[-1],
            code_version=spec["code_version"],
            reason=spec["reason"],
            now=at,
        )

    timeline.at(opened_at, open_it)
    for index, key in enumerate(keys):
        timeline.at(
            opened_at + timedelta(minutes=4 + 3 * index),
            lambda at, key=key: _publish(
                actor, dataset, key, restatement=state["restatement"].pk, now=at
            ),
        )
    timeline.at(
        opened_at + timedelta(minutes=40),
        lambda at: restatements.restatement_promote(
            actor=actor, restatement=state["restatement"], now=at
        ),
    )
