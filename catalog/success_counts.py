"""Each endpoint's successes per hour (``EndpointSuccessHour``), kept where a delivery
becomes succeeded, so that its health (the team page, ``GET /api/v1/endpoints``) reads
about 25 rows per endpoint however many deliveries it gets: counting a day of its
succeeded deliveries would cost millions of index entries at hundreds a second.

The health window is whole hours, as the counters are kept: from the start of the hour
that contains ``now - HEALTH_WINDOW`` on (``health_window_start``), so 24 to 25 hours.

Where a delivery becomes succeeded, the counter is written in the same transaction:
``success_batches.successes_record`` (PostgreSQL, a batch's plain successes, inside its
one statement), ``delivery.delivery_record`` (one by one, and every outcome on the
embedded SQLite, through ``successes_add``) and the demo history's settling
(``catalog.demo.outbox``). Only deliveries whose write-back happened are counted: a
claim lost to another worker is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from django.db import connection

from .models import EndpointSuccessHour

# The health's window: its successes and success rate cover this much time before now,
# rounded back to the start of that hour (``health_window_start``).
HEALTH_WINDOW = timedelta(hours=24)

_TABLE = EndpointSuccessHour._meta.db_table
_ROWS = 500


def hour_of(at: datetime) -> datetime:
    """The start of the UTC hour containing ``at`` (aware), as an aware UTC datetime."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def health_window_start(now: datetime) -> datetime:
    """Where an endpoint's health starts counting at ``now`` (aware): the start of the
    UTC hour containing ``now - HEALTH_WINDOW``, so the window is 24 to 25 hours long
    (a success 24.5 hours before 12:40 finished at 12:10 the day before, in the first
    hour counted; one 24.5 hours before 12:20, at 11:50, is not counted)."""
    return hour_of(now - HEALTH_WINDOW)


def successes_add(counts: Mapping[tuple[int, datetime], int]) -> None:
    """Add succeeded deliveries to the endpoints' hourly counters, in one statement per
    500 rows (an upsert that adds to a counter already there), inside the caller's
    transaction.

    Args:
        counts: ``{(endpoint id, hour): deliveries}``, the hour aware and on the hour
            (``hour_of``); counts of 0 or less are skipped.

    Side effects: locks each counter row written until the transaction ends, in the
    order of endpoint ids, so two writers of the same endpoints never deadlock.
    Works on PostgreSQL and the embedded SQLite alike.
    """
    rows = sorted((key, n) for key, n in counts.items() if n > 0)
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        # Statements of at most _ROWS rows (a demo history's month), under SQLite's limit
        # of bound parameters; the recording paths write one row.
        for start in range(0, len(rows), _ROWS):
            chunk = rows[start : start + _ROWS]
            cursor.execute(
                f"INSERT INTO {_TABLE} (endpoint_id, hour, succeeded) VALUES "  # noqa: S608
                + ", ".join(["(%s, %s, %s)"] * len(chunk))
                + f" ON CONFLICT (endpoint_id, hour) DO UPDATE SET succeeded = "
                f"{_TABLE}.succeeded + excluded.succeeded",
                [v for (endpoint_id, hour), n in chunk for v in (endpoint_id, adapt(hour), n)],
            )
