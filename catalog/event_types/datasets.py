"""``dataset.late`` and ``dataset.recovered`` (``catalog.freshness``),
``dataset.unusually_late`` (``catalog.unusually_late``), ``dataset.at_risk``
(``catalog.at_risk``) and
``dataset.version_promoted`` (``catalog.restatements``)."""

from __future__ import annotations

from .common import (
    DATE_TIME,
    EventType,
    Schema,
    boolean,
    dataset_ref,
    envelope,
    example,
    integer,
    nullable,
    obj,
    string,
)

LATE = "dataset.late"
RECOVERED = "dataset.recovered"
UNUSUALLY_LATE = "dataset.unusually_late"
AT_RISK = "dataset.at_risk"
VERSION_PROMOTED = "dataset.version_promoted"


def _lateness(fields: dict[str, Schema], *, optional: tuple[str, ...] = ()) -> Schema:
    return obj(
        {
            "dataset": dataset_ref(with_id=False),
            "owner": string("the owner team's slug"),
            "partition": string("the partition that is (was) late"),
            "deadline_at": DATE_TIME,
            "late_at": {
                **DATE_TIME,
                "description": "the deadline plus grace (judged_at need_by: the need-by)",
            },
            **fields,
        },
        optional=optional,
    )


_DATASET = {"namespace": "s3://lake", "name": "raw/orders"}
_LATE_EXAMPLE = {
    "dataset": _DATASET,
    "owner": "orders",
    "partition": "2026-11-28",
    "deadline_at": "2026-11-29T06:00:00Z",
    "late_at": "2026-11-29T06:30:00Z",
}

_UPSTREAM_REF = obj(
    {
        "dataset": dataset_ref(with_id=False),
        "partition": string("the upstream partition"),
    }
)

_CAUSED_BY = obj(
    {
        "namespace": string("the upstream dataset's namespace"),
        "name": string("the upstream dataset's name"),
        "partition": string("the upstream partition this one needs"),
        "since": {
            **DATE_TIME,
            "description": "late: its deadline plus grace; failed: when its failure was received",
        },
        "state": string("late or failed", enum=["late", "failed"]),
    }
)

_CAUSED_BY = obj(
    {
        "namespace": string("the upstream dataset's namespace"),
        "name": string("the upstream dataset's name"),
        "partition": string("the upstream partition this one needs"),
        "since": {
            **DATE_TIME,
            "description": "late: its deadline plus grace; failed: when its failure was received",
        },
        "state": string("late or failed", enum=["late", "failed"]),
    }
)

EVENT_TYPES = (
    EventType(
        name=LATE,
        audience=("subscribers", "owners"),
        description=(
            "A partition was not ready by its deadline plus grace (the dataset's freshness "
            "SLA; judged_at sla), sent once per dataset and partition to its subscribers and "
            "owner, dataset.recovered following when it lands. Or a partition was not ready "
            "at a subscription's own need-by (judged_at need_by; deadline_at and late_at are "
            "the need-by: no grace), sent to that subscription alone, once per subscription "
            "and partition, before the SLA has judged it; the owner is not told nor paged, "
            "and the SLA's own dataset.late is not sent to it again. `caused_by` (judged_at "
            "sla: always present) names the root cause: the upstream partition furthest up "
            "verified lineage (the datasets read by the jobs writing this one, for the "
            "period this partition needs) that was late or failed when this one was found "
            "late; null when none was."
        ),
        schema=envelope(
            LATE,
            _lateness(
                {
                    "late_seconds": integer("seconds past late_at when it was judged"),
                    "judged_at": string(
                        "sla: the dataset's SLA deadline plus grace; need_by: the receiving "
                        "subscription's need-by",
                        enum=["sla", "need_by"],
                    ),
                    "subscription_id": integer(
                        "judged_at need_by only: the subscription whose need-by it is"
                    ),
                    "caused_by": nullable(_CAUSED_BY),
                },
                optional=("subscription_id", "caused_by"),
            ),
            title="Dataset late",
        ),
        example=example(
            LATE,
            {
                **_LATE_EXAMPLE,
                "late_seconds": 12,
                "judged_at": "sla",
                "caused_by": {
                    "namespace": "postgres://shop:5432",
                    "name": "shop.public.orders",
                    "partition": "2026-11-28",
                    "since": "2026-11-29T04:30:00Z",
                    "state": "late",
                },
            },
            at="2026-11-29T06:30:12Z",
        ),
    ),
    EventType(
        name=RECOVERED,
        audience=("subscribers", "owners"),
        description="A partition that was late became ready.",
        schema=envelope(
            RECOVERED,
            _lateness(
                {
                    "recovered_at": DATE_TIME,
                    "late_by_seconds": integer("from late_at to recovered_at"),
                }
            ),
            title="Dataset recovered",
        ),
        example=example(
            RECOVERED,
            {
                **_LATE_EXAMPLE,
                "recovered_at": "2026-11-29T07:02:41Z",
                "late_by_seconds": 1961,
            },
            at="2026-11-29T07:02:41Z",
        ),
    ),
    EventType(
        name=UNUSUALLY_LATE,
        audience=("subscribers", "owners"),
        description=(
            "A partition of a dataset without a freshness SLA is much later than the dataset "
            "usually delivers, judged from its learned arrival profile: not ready at its "
            "period's end plus max(p99, p50 + max(30 min, 3 x (p90 - p50))) of the periods "
            "ending on the same weekday (or business days / weekends), once the profile "
            "counts 14 arrivals (both configurable). Sent once per dataset and partition, "
            "never paged, and nothing follows when the partition lands. Subscribers receive "
            "it only when their subscription lists it in `event_types`: an empty list does "
            "not include it."
        ),
        schema=envelope(
            UNUSUALLY_LATE,
            obj(
                {
                    "dataset": dataset_ref(with_id=False),
                    "owner": string("the owner team's slug"),
                    "partition": string("the partition that is later than usual"),
                    "period_end": {**DATE_TIME, "description": "the end of its logical period"},
                    "expected_by": {
                        **DATE_TIME,
                        "description": "period_end + usual.after_seconds: from then on it is "
                        "later than usual",
                    },
                    "late_seconds": integer("seconds past expected_by when it was judged"),
                    "usual": obj(
                        {
                            "group": string(
                                "the periods compared with: a weekday (monday..sunday), "
                                "business_days or weekends",
                            ),
                            "periods": integer("arrivals in that group"),
                            "p50_seconds": integer("median arrival, seconds after period end"),
                            "p90_seconds": integer(),
                            "p99_seconds": integer(),
                            "after_seconds": integer("expected_by - period_end"),
                        }
                    ),
                    "profile_periods": integer("arrivals counted in the whole profile"),
                }
            ),
            title="Dataset later than usual",
        ),
        example=example(
            UNUSUALLY_LATE,
            {
                "dataset": _DATASET,
                "owner": "orders",
                "partition": "2026-11-28",
                "period_end": "2026-11-29T00:00:00Z",
                "expected_by": "2026-11-29T06:10:00Z",
                "late_seconds": 40,
                "usual": {
                    "group": "sunday",
                    "periods": 12,
                    "p50_seconds": 18600,
                    "p90_seconds": 19800,
                    "p99_seconds": 21000,
                    "after_seconds": 22200,
                },
                "profile_periods": 88,
            },
            at="2026-11-29T06:10:40Z",
        ),
    ),
    EventType(
        name=AT_RISK,
        audience=("subscribers", "owners"),
        description=(
            "A partition that is not ready yet will probably miss its deadline: its "
            "forecast arrival (from the dataset's own arrival profile and from its upstream "
            "datasets in verified lineage, each later than usual plus the learned lag "
            "between its arrival and this dataset's) is past the deadline, or a partition "
            "it needs upstream failed. Sent before the deadline, once per dataset and "
            "partition, never paged; dataset.late follows if it does miss it. `cause` names "
            "the partition furthest up the chain that holds it up, `via` the direct "
            "upstream. Subscribers receive it unless their subscription's `event_types` "
            "leaves it out."
        ),
        schema=envelope(
            AT_RISK,
            obj(
                {
                    "dataset": dataset_ref(with_id=False),
                    "owner": string("the owner team's slug"),
                    "partition": string("the partition at risk"),
                    "deadline_at": DATE_TIME,
                    "estimate_at": nullable(
                        {
                            **DATE_TIME,
                            "description": "when it is expected; null when a failed "
                            "upstream partition blocks it",
                        }
                    ),
                    "blocked": boolean("a failed upstream partition holds it up"),
                    "basis": string(
                        "what set the estimate: p90 or overdue (its own profile), "
                        "upstream_lag (an upstream), failed (a failed partition)"
                    ),
                    "via": nullable(_UPSTREAM_REF),
                    "cause": nullable(_UPSTREAM_REF),
                }
            ),
            title="Dataset at risk",
        ),
        example=example(
            AT_RISK,
            {
                "dataset": _DATASET,
                "owner": "orders",
                "partition": "2026-11-28",
                "deadline_at": "2026-11-29T06:00:00Z",
                "estimate_at": "2026-11-29T06:40:00Z",
                "blocked": False,
                "basis": "upstream_lag",
                "via": {
                    "dataset": {"namespace": "s3://lake", "name": "staging/orders"},
                    "partition": "2026-11-28",
                },
                "cause": {
                    "dataset": {"namespace": "postgres://shop:5432", "name": "shop.public.orders"},
                    "partition": "2026-11-28",
                },
            },
            at="2026-11-29T04:55:00Z",
        ),
    ),
    EventType(
        name=VERSION_PROMOTED,
        audience=("subscribers",),
        description=(
            "A restatement was promoted: every partition of its range now serves its version, "
            "all at once. One notice for the whole range (no partition.restated per partition)."
        ),
        schema=envelope(
            VERSION_PROMOTED,
            obj(
                {
                    "restatement_id": integer(),
                    "dataset": dataset_ref(with_id=True),
                    "version": string(),
                    "code_version": string("what produced it; empty when not given"),
                    "first_partition": string(),
                    "last_partition": string("inclusive"),
                    "promoted_at": DATE_TIME,
                    "partitions": {
                        "type": "array",
                        "items": obj(
                            {
                                "partition": string(),
                                "version": string(),
                                "code_version": string(),
                                "previous_version": nullable(string()),
                                "previous_code_version": nullable(string()),
                            }
                        ),
                    },
                }
            ),
            title="Dataset version promoted",
        ),
        example=example(
            VERSION_PROMOTED,
            {
                "restatement_id": 7,
                "dataset": {"id": 42, **_DATASET},
                "version": "v2-dedup",
                "code_version": "f00ba47",
                "first_partition": "2026-11-01",
                "last_partition": "2026-11-02",
                "promoted_at": "2026-11-29T09:15:00Z",
                "partitions": [
                    {
                        "partition": key,
                        "version": "v2-dedup",
                        "code_version": "f00ba47",
                        "previous_version": "v1",
                        "previous_code_version": None,
                    }
                    for key in ("2026-11-01", "2026-11-02")
                ],
            },
            at="2026-11-29T09:15:00Z",
        ),
    ),
)
