"""Running lineage collectors: pulled access history (database audit logs, say) recorded
as verified usage of the teams that claim each principal, or held until a team claims it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F

from catalog import selectors
from catalog.models import Claim
from catalog.services import usage

from .. import collectors
from ..errors import CollectorUnknown
from ..models import CollectorCursor

COLLECT_LINEAGE = "lineage.tasks.collect_lineage"


@dataclass
class CollectSummary:
    """What one collector run did: accesses observed, usage rows recorded (for
    principals a team claims), principals no team claims (their jobs are recorded and
    their accesses held, attributed to no team, until a team claims the role), and
    whether history was left to read (``more``); ``skipped`` when
    another run of the same collector held its cursor."""

    collector: str
    accesses: int = 0
    recorded: int = 0
    unclaimed_principals: list[str] = field(default_factory=list)
    more: bool = False
    skipped: bool = False
    stats: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-serialisable data (kept on the cursor row)."""
        return {
            "accesses": self.accesses,
            "recorded": self.recorded,
            "unclaimed_principals": self.unclaimed_principals,
            "more": self.more,
            **self.stats,
        }

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.collector}: skipped (another run holds it)"
        unclaimed = ", ".join(self.unclaimed_principals) or "none"
        return (
            f"{self.collector}: {self.accesses} accesses, {self.recorded} usage rows; "
            f"unclaimed principals: {unclaimed}{'; more to read' if self.more else ''}"
        )


def collector_run(*, name: str, now: datetime) -> CollectSummary:
    """Run one configured lineage collector once and record what it observed.

    In one transaction: the collector's cursor row is locked (a concurrent run of the same
    collector is skipped, not queued), the collector reads one bounded slice of its
    source after the cursor, every observed access of a principal that a team claims
    (``Claim`` kind ``db_role``, pattern ``<job namespace>/<principal>``) is recorded as
    verified usage of the job ``<job namespace>`` / ``<principal>`` for that team (its
    ``run_count`` grows by the access count), the jobs of unclaimed principals are
    recorded without an owner and their accesses held (``catalog.UnclaimedUsage``) until
    a team claims the role, which makes them its usage at once
    (``catalog.services.usage.held_usage_attribute``), and the new cursor is stored. A failure
    rolls all of it back, so the next run reads the same history again: running twice records once.

    Args:
        name: a key of ``TIDEMARK_LINEAGE_COLLECTORS``.
        now: aware UTC instant of the run.

    Returns:
        A ``CollectSummary``.

    Raises:
        CollectorUnknown: no collector of that name is configured.
        CollectorConfigError: its settings entry is malformed.
        Whatever the source raises (``psycopg.Error`` ...): nothing is recorded.
    """
    config = collectors.configured()
    if name not in config:
        raise CollectorUnknown(f"no lineage collector {name!r} is configured")
    collector = collectors.build(name, config[name])
    summary = CollectSummary(collector=name)
    CollectorCursor.objects.get_or_create(name=name)
    with transaction.atomic():
        row = CollectorCursor.objects.select_for_update(skip_locked=True).filter(name=name).first()
        if row is None:
            summary.skipped = True
            return summary
        collection = collector.collect(cursor=row.state or None, now=now)
        summary.accesses = len(collection.accesses)
        summary.more = collection.more
        summary.stats = dict(collection.stats)
        summary.recorded, summary.unclaimed_principals = _record_accesses(
            collector, collection.accesses
        )
        CollectorCursor.objects.filter(pk=row.pk).update(
            state=collection.cursor,
            runs=F("runs") + 1,
            last_run_at=now,
            last_summary=summary.as_dict(),
            updated_at=now,
        )
    return summary


def _record_accesses(
    collector: collectors.Collector, accesses: list[collectors.ObservedAccess]
) -> tuple[int, list[str]]:
    """Record accesses as usage, per principal in name order (so concurrent collectors
    lock rows in one order). Returns (usage rows touched, unclaimed principals)."""
    by_principal: dict[str, list[collectors.ObservedAccess]] = {}
    for access in accesses:
        by_principal.setdefault(access.principal, []).append(access)
    patterns = {principal: f"{collector.job_namespace}/{principal}" for principal in by_principal}
    teams = selectors.claimants(kind=Claim.Kind.DB_ROLE, patterns=sorted(patterns.values()))
    recorded = 0
    unclaimed: list[str] = []
    for principal in sorted(by_principal):
        team = teams.get(patterns[principal])
        principal_accesses = by_principal[principal]
        seen_at = max(access.observed_at for access in principal_accesses)
        job = usage.job_record(
            namespace=collector.job_namespace, name=principal, team=team, seen_at=seen_at
        )
        counts: dict[tuple[str, str, str], int] = {}
        for access in principal_accesses:
            edge = (access.direction, access.namespace, access.name)
            counts[edge] = counts.get(edge, 0) + access.count
        if team is None:  # held, attributed to no team, until a team claims the role
            unclaimed.append(principal)
            usage.usages_hold(job=job, pattern=patterns[principal], counts=counts, seen_at=seen_at)
            continue
        # What was held while it was unclaimed and the claim did not see (it committed
        # while this run was reading) is the claimant's now.
        usage.held_usage_attribute(team=team, pattern=patterns[principal])
        edges = sorted(counts, key=lambda edge: (edge[1], edge[2], edge[0]))
        usage_ids = usage.usages_observe(
            job=job, edges=edges, team=team, verified=True, seen_at=seen_at
        )
        # An alias and its dataset share a row: their accesses add up.
        per_usage: dict[int, int] = {}
        for edge, usage_id in usage_ids.items():
            per_usage[usage_id] = per_usage.get(usage_id, 0) + counts[edge]
        by_count: dict[int, list[int]] = {}
        for usage_id, count in per_usage.items():
            by_count.setdefault(count, []).append(usage_id)
        for count, ids in sorted(by_count.items()):
            usage.usage_count_runs(usage_ids=sorted(ids), runs=count)
        recorded += len(per_usage)
    return recorded, unclaimed
