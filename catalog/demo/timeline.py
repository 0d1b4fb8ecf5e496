"""Playing the demo's history in time order: each happening runs at its instant under the
demo clock, and between happenings the periodic work the workers would have done runs at
its own instants (SLA deadlines judged, change notices' reminders and effective dates),
through the same services beat's tasks call."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db.models import Min

from .. import change_notices, freshness
from ..models import ChangeNotice, Dataset
from . import clock

Happening = Callable[[datetime], object]


class Timeline:
    """Happenings to play, each at an aware UTC instant; those after ``now`` never run."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now
        self._items: list[tuple[datetime, int, Happening]] = []

    def at(self, when: datetime, happening: Happening) -> None:
        """Run ``happening(when)`` at ``when`` (dropped when ``when`` is after ``now``)."""
        if when <= self.now:
            self._items.append((when, len(self._items), happening))

    def play(self) -> int:
        """Run every happening in time order (ties in the order added), with the periodic
        work due strictly before each; then the periodic work due by ``now``.

        Returns:
            How many happenings ran.
        """
        items = sorted(self._items, key=lambda item: (item[0], item[1]))
        self._items = []
        for when, _, happening in items:
            periodic_work(until=when, inclusive=False)
            with clock.at(when):
                happening(when)
        periodic_work(until=self.now, inclusive=True)
        return len(items)


def periodic_work(*, until: datetime, inclusive: bool) -> int:
    """Judge every SLA deadline and send every change-notice step that came due before
    ``until`` (or at it, when ``inclusive``), each at its own instant, oldest first:
    what beat's one-minute ticks would have done. A deadline judged at its check time
    finds exactly what had arrived by then.

    Returns:
        How many instants it ran work at.
    """
    ran, last = 0, None
    while True:
        check = Dataset.objects.aggregate(at=Min("next_check_at"))["at"]
        step = ChangeNotice.objects.aggregate(at=Min("next_step_at"))["at"]
        due = [
            t for t in (check, step) if t is not None and (t < until or (inclusive and t == until))
        ]
        if not due:
            return ran
        instant = min(due)
        if instant == last:  # the services always move the stored instant on
            raise RuntimeError(f"periodic work at {instant} did not move on")
        last = instant
        with clock.at(instant):
            if check == instant:
                # ``freshness.recover_arrived``, the repair sweep beat runs after each
                # evaluation, has nothing to repair here: no publish races this one.
                freshness.evaluate_due(now=instant)
            if step == instant:
                change_notices.send_due(now=instant)
        ran += 1
