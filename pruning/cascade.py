"""Deleting a batch of rows by primary key, with what Django's ``on_delete`` makes follow
them, in a few set-based statements instead of through Django's deletion collector.

The collector loads every row of a batch as a model instance and deletes in chunks of 100
keys: for a batch of 5,000 deliveries that is about 50 statements and 0.2 s of Python CPU
per batch, three times the database's own work, all of it taken from the live workload
beside the prune. Here a batch is one ``DELETE ... WHERE pk = ANY(%s)`` per table it
reaches (and an ``UPDATE`` per ``SET_NULL``), children before parents, so it holds the
same rows and the same foreign keys as the collector would, in the same transaction.

Only the plain cases are planned: ``CASCADE``, ``SET_NULL`` and ``DO_NOTHING`` relations
to the primary key, no delete signal listened to, no generic relation, no multi-table
inheritance, PostgreSQL. Anything else (``PROTECT``, ``RESTRICT``, ``SET_DEFAULT``,
``SET(...)``, the embedded SQLite mode) has no plan, and the caller uses the collector.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache

from django.db import connections, models
from django.db.models import signals
from django.db.models.deletion import CASCADE, DO_NOTHING, SET_NULL

_SIGNALS = (signals.pre_delete, signals.post_delete, signals.m2m_changed)


@dataclass(frozen=True)
class Edge:
    """A relation to a planned model's primary key from ``column`` of ``model``: on delete
    the rows of ``model`` naming a deleted key are deleted too (after what ``plan`` reaches
    from them), or with ``set_null`` keep their row with ``column`` set to NULL."""

    model: type[models.Model]
    column: str
    set_null: bool
    plan: tuple[Edge, ...] = ()


def _relations(model: type[models.Model]):
    """The reverse one-to-one and one-to-many relations Django's collector follows."""
    return [
        field
        for field in model._meta.get_fields(include_hidden=True)
        if field.auto_created and not field.concrete and (field.one_to_one or field.one_to_many)
    ]


def _plan(model: type[models.Model], seen: frozenset[type[models.Model]]) -> tuple[Edge, ...]:
    """The edges below ``model``; raises ``LookupError`` for what this module does not do."""
    meta = model._meta
    if model in seen:
        raise LookupError(f"{meta.label}: a cycle of cascades")
    if meta.parents or meta.private_fields:
        raise LookupError(f"{meta.label}: inheritance or a generic relation")
    if getattr(meta.pk, "column", None) is None:
        raise LookupError(f"{meta.label}: a primary key of several columns")
    edges = []
    for relation in _relations(model):
        related, field = relation.related_model, relation.field
        if len(field.foreign_related_fields) != 1 or field.foreign_related_fields[0] != meta.pk:
            raise LookupError(f"{related._meta.label}.{field.name}: not to the primary key")
        if relation.on_delete is DO_NOTHING:
            continue
        if relation.on_delete is SET_NULL:
            edges.append(Edge(model=related, column=field.column, set_null=True))
        elif relation.on_delete is CASCADE:
            below = _plan(related, seen | {model})
            edges.append(Edge(model=related, column=field.column, set_null=False, plan=below))
        else:
            raise LookupError(f"{related._meta.label}.{field.name}: {relation.on_delete}")
    return tuple(edges)


@cache
def _structure(model: type[models.Model]) -> tuple[Edge, ...] | None:
    try:
        return _plan(model, frozenset())
    except LookupError:
        return None


def _reached(model: type[models.Model], edges: tuple[Edge, ...]):
    yield model
    for edge in edges:
        yield from _reached(edge.model, edge.plan)


def plan(model: type[models.Model]) -> tuple[Edge, ...] | None:
    """What deleting rows of ``model`` reaches, or None where the collector must do it:
    a relation this module does not follow, or a delete signal listened to on a model the
    deletion reaches (checked on every call: a receiver connected at any time is seen)."""
    edges = _structure(model)
    if edges is None:
        return None
    for reached in _reached(model, edges):
        if any(signal.has_listeners(reached) for signal in _SIGNALS):
            return None
    return edges


def plannable(model: type[models.Model], alias: str) -> bool:
    """Whether ``delete`` can delete ``model``'s rows on database ``alias``."""
    return connections[alias].vendor == "postgresql" and plan(model) is not None


def delete(model: type[models.Model], ids: list, *, alias: str) -> Counter[str]:
    """Delete the rows of ``model`` whose primary key is in ``ids`` and what their
    relations make follow (rows deleted, or their column set to NULL), inside the caller's
    transaction on PostgreSQL database ``alias``.

    Returns:
        Rows deleted per model label, as ``QuerySet.delete()`` counts them (rows only set
        to NULL are not counted).

    Raises:
        ValueError: ``model`` has no plan on ``alias`` (check ``plannable`` first).
    """
    if not plannable(model, alias):
        raise ValueError(f"{model._meta.label} cannot be deleted set-based on {alias}")
    counts: Counter[str] = Counter()
    with connections[alias].cursor() as cursor:
        _delete(cursor, model, plan(model), ids, counts)
    return Counter({label: n for label, n in counts.items() if n})


def _delete(cursor, model, edges: tuple[Edge, ...], ids: list, counts: Counter[str]) -> None:
    # Table and column names come from the models' metadata, quoted; values are parameters.
    quote = cursor.db.ops.quote_name
    if not ids:
        return
    for edge in edges:
        table, column = quote(edge.model._meta.db_table), quote(edge.column)
        if edge.set_null:
            set_null = f"UPDATE {table} SET {column} = NULL WHERE {column} = ANY(%s)"  # noqa: S608
            cursor.execute(set_null, [ids])
        elif edge.plan:  # its own children go first: their keys are needed
            pk = quote(edge.model._meta.pk.column)
            cursor.execute(f"SELECT {pk} FROM {table} WHERE {column} = ANY(%s)", [ids])  # noqa: S608
            _delete(cursor, edge.model, edge.plan, [row[0] for row in cursor.fetchall()], counts)
        else:
            cursor.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", [ids])  # noqa: S608
            counts[edge.model._meta.label] += cursor.rowcount
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    cursor.execute(f"DELETE FROM {table} WHERE {pk} = ANY(%s)", [ids])  # noqa: S608
    counts[model._meta.label] += cursor.rowcount
