"""Typed views of the API's answers. Each keeps the whole answer as ``raw``, so a field
added by a newer server is still reachable."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The states a partition's current revision can be in, and ``missing`` (no revision).
PARTITION_STATES = ("missing", "pending", "ready", "failed")


@dataclass(frozen=True)
class DatasetRef:
    """A dataset's identity in the OpenLineage naming spec: ``namespace`` and ``name``."""

    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> DatasetRef:
        """Split a dataset URI, the form the OpenLineage naming spec gives as
        ``{namespace}/{name}``: ``s3://lake/raw/orders`` is namespace ``s3://lake`` and
        name ``raw/orders``; ``postgres://db:5432/shop.public.orders`` is
        ``postgres://db:5432`` and ``shop.public.orders``. The namespace is the scheme and
        authority (``scheme://authority``), or, without ``://``, everything before the
        first ``/`` (``bigquery/project.dataset.table``).

        Raises:
            ValueError: no ``/`` separates a namespace from a name.
        """
        scheme, sep, rest = text.partition("://")
        if sep:
            authority, slash, name = rest.partition("/")
            namespace = f"{scheme}://{authority}"
        else:
            namespace, slash, name = text.partition("/")
        if not slash or not name or not namespace.strip("/:"):
            raise ValueError(
                f"{text!r} is not a dataset URI: write NAMESPACE/NAME, e.g. s3://lake/raw/orders"
            )
        return cls(namespace=namespace, name=name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Dataset:
    """A catalogued dataset (``GET /api/v1/datasets``): its id, identity, owner team and
    the settings a command line shows; everything else is in ``raw``."""

    id: int
    namespace: str
    name: str
    owner: str
    criticality: str
    partitioning: str
    lifecycle: str
    sla_cron: str
    next_deadline_at: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Dataset:
        return cls(
            id=int(data["id"]),
            namespace=data["namespace"],
            name=data["name"],
            owner=data.get("owner", ""),
            criticality=data.get("criticality", ""),
            partitioning=data.get("partitioning", ""),
            lifecycle=data.get("lifecycle", ""),
            sla_cron=data.get("sla_cron", ""),
            next_deadline_at=data.get("next_deadline_at"),
            raw=data,
        )

    @property
    def ref(self) -> DatasetRef:
        return DatasetRef(self.namespace, self.name)


@dataclass(frozen=True)
class Partition:
    """A partition (``GET /api/v1/datasets/{id}/partitions/{key}``): ``state`` is its
    current revision's (``pending``, ``ready``, ``failed``) or ``missing``; ``version``
    is the current revision's label, None without one."""

    key: str
    state: str
    logical_start: str | None
    logical_end: str | None
    version: str | None
    ready_at: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Partition:
        revision = data.get("current_revision") or {}
        return cls(
            key=data["key"],
            state=data.get("state", "missing"),
            logical_start=data.get("logical_start"),
            logical_end=data.get("logical_end"),
            version=revision.get("version"),
            ready_at=revision.get("ready_at"),
            raw=data,
        )


@dataclass(frozen=True)
class PublishResult:
    """The answer to a publish (``POST /api/v1/readiness``).

    Attributes:
        status_code: 201 when something changed, 200 for a repeat of what the partition
            already says.
        replayed: True when the server replayed the first answer to the same
            ``Idempotency-Key`` (the ``Idempotent-Replayed`` header).
        idempotency_key: the key sent, or None.
    """

    partition: str
    state: str
    version: str | None
    current_version: str | None
    status_code: int
    replayed: bool
    idempotency_key: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_answer(
        cls, data: dict[str, Any], *, status_code: int, replayed: bool, key: str | None
    ) -> PublishResult:
        return cls(
            partition=data.get("partition", ""),
            state=data.get("state", ""),
            version=data.get("version"),
            current_version=data.get("current_version"),
            status_code=status_code,
            replayed=replayed,
            idempotency_key=key,
            raw=data,
        )


@dataclass(frozen=True)
class PingResult:
    """A watchdog ping's answer: its status, its text (``OK``, ``Created``) and the
    ``Ping-Body-Limit`` it announced (bytes of a body it keeps; None when absent)."""

    status_code: int
    text: str
    body_limit: int | None
