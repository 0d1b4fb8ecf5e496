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
        self._items: list[tuple[datetime, int, Happening, bool]] = []

    def at(self, when: datetime, happening: Happening, *, reschedules: bool = False) -> None:
        """Run ``happening(when)`` at ``when`` (dropped when ``when`` is after ``now``).

        Args:
            reschedules: it may move a stored deadline or change-notice step (announcing
                a notice, changing an SLA): the periodic work's next instant is read
                again after it. Publishes, finds and subscriptions do not.
        """
        if when <= self.now:
            self._items.append((when, len(self._items), happening, reschedules))

    def play(self) -> int:
        """Run every happening in time order (ties in the order added), with the periodic
        work due strictly before each; then the periodic work due by ``now``.

        Returns:
            How many happenings ran.
        """
        items = sorted(self._items, key=lambda item: (item[0], item[1]))
        self._items = []
        work = PeriodicWork()
        for when, _, happening, reschedules in items:
            work.run(until=when, inclusive=False)
            with clock.at(when):
                happening(when)
            if reschedules:
                work.forget()
        work.run(until=self.now, inclusive=True)
        return len(items)


class PeriodicWork:
    """The work beat's one-minute ticks would have done between happenings: judge every
    SLA deadline and send every change-notice step that came due, each at its own
    instant, oldest first. A deadline judged at its check time finds exactly what had
    arrived by then. The next instant is read from the stored rows once, and again after
    work ran or ``forget`` (a happening moved it)."""

    def __init__(self) -> None:
        self._next: tuple[datetime | None, datetime | None] | None = None

    def forget(self) -> None:
        self._next = None

    def run(self, *, until: datetime, inclusive: bool) -> int:
        """Do what came due before ``until`` (or at it, when ``inclusive``).

        Returns:
            How many instants it ran work at.
        """
        ran, last = 0, None
        while True:
            if self._next is None:
                self._next = (
                    Dataset.objects.aggregate(at=Min("next_check_at"))["at"],
                    ChangeNotice.objects.aggregate(at=Min("next_step_at"))["at"],
                )
            check, step = self._next
            due = [
                t
                for t in (check, step)
                if t is not None and (t < until or (inclusive and t == until))
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
            self._next = None
            ran += 1
