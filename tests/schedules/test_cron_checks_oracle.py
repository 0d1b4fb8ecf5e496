"""``schedules.cron_checks`` against a brute-force oracle.

Hypothesis draws each cron field as structured items (a number, a range with a step, a
star with a step, ``L``, ``LW``, ``5L``, ``MON#2``, names), renders them as text, and the
oracle reads the *items* (never the text) in the simplest code:

- a day fires when it matches day-of-month AND day-of-week, or OR when neither field's
  text starts with ``*`` (Vixie cron's rule);
- the expression never fires when no day of 2001-2028 fires (those 28 years hold every
  kind of Gregorian year: leap or not, starting on each weekday);
- ``every_minute_of_fixed_hour``: walking one day minute by minute, some hour fires all
  60 minutes and some hour fires none;
- ``day_of_month_or_day_of_week``: read as OR, some day of 2001-2028 fires that would not
  under AND;
- ``not_every_year``: some year of 2001-2028 has no firing day.

Accepted expressions are also handed to ``next_deadline`` (cronsim), which must find a
firing on a day the oracle says fires.
"""

from __future__ import annotations

import calendar
import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from schedules import CronRefused, check_cron, next_deadline
from schedules.cron_checks import (
    DAY_OF_MONTH_OR_DAY_OF_WEEK,
    EVERY_MINUTE_OF_FIXED_HOUR,
    NOT_EVERY_YEAR,
)

from .strategies import oracle_examples

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
CYCLE = [
    date(2001, 1, 1) + timedelta(days=n) for n in range((date(2029, 1, 1) - date(2001, 1, 1)).days)
]


@dataclass(frozen=True)
class Item:
    """One comma-separated item: kind is num, range, star, last (L / 5L), lastweekday
    (LW) or nth (MON#2); ``a``, ``b``, ``step`` as the kind needs."""

    kind: str
    a: int = 0
    b: int = 0
    step: int = 1
    name: bool = False

    def text(self, names: list[str] | None, offset: int) -> str:
        def show(v):
            named = self.name and names and v - offset < len(names)
            return names[v - offset] if named else str(v)

        if self.kind == "num":
            return show(self.a)
        if self.kind == "star":
            return "*" if self.step == 1 else f"*/{self.step}"
        if self.kind == "range":
            body = f"{show(self.a)}-{show(self.b)}"
            return body if self.step == 1 else f"{body}/{self.step}"
        if self.kind == "last":
            return "L" if names is None else f"{self.a}L"
        if self.kind == "lastweekday":
            return "LW"
        return f"{show(self.a)}#{self.b}"  # nth

    @functools.cache  # noqa: B019 - a handful of small frozen items per example
    def values(self, low: int, high: int) -> frozenset[int]:
        if self.kind == "num":
            return frozenset({self.a})
        if self.kind == "star":
            return frozenset(range(low, high + 1, self.step))
        return frozenset(range(self.a, self.b + 1, self.step))  # range


def _items(low, high, *, names=None, extra=()):
    value = st.integers(low, high)
    steps = st.sampled_from([1, 1, 2, 3, 5, 7, 10, 15, 31])
    plain = st.one_of(
        st.builds(Item, st.just("num"), value, name=st.booleans() if names else st.just(False)),
        st.builds(
            lambda ab, step, name: Item("range", min(ab), max(ab), step, name),
            st.tuples(value, value),
            steps,
            st.booleans() if names else st.just(False),
        ),
        *extra,
    )
    star = st.builds(Item, st.just("star"), step=steps)
    return st.one_of(
        star.map(lambda i: [i]),
        st.lists(plain, min_size=1, max_size=3),
    )


WEEKDAY_EXTRA = (
    st.builds(Item, st.just("last"), st.integers(0, 7)),
    st.builds(Item, st.just("nth"), st.integers(0, 7), st.integers(1, 5), name=st.booleans()),
)
DOM_EXTRA = (st.just(Item("last")), st.just(Item("lastweekday")))


@dataclass(frozen=True, eq=False)
class Spec:
    minute: list[Item]
    hour: list[Item]
    dom: list[Item]
    month: list[Item]
    dow: list[Item]

    def texts(self) -> list[str]:
        return [
            ",".join(i.text(None, 0) for i in self.minute),
            ",".join(i.text(None, 0) for i in self.hour),
            ",".join(i.text(None, 1) for i in self.dom),
            ",".join(i.text(MONTHS, 1) for i in self.month),
            ",".join(i.text(WEEKDAYS, 0) for i in self.dow),
        ]

    def expression(self) -> str:
        return " ".join(self.texts())

    @functools.cached_property
    def months(self) -> set[int]:
        return _set(self.month, 1, 12)


SHORT_MONTHS = st.lists(
    st.sampled_from([2, 4, 6, 9, 11]).map(lambda m: Item("num", m)), min_size=1, max_size=2
)
specs = st.builds(
    Spec,
    _items(0, 59),
    _items(0, 23),
    # Days near the end of months, February and 30-day months, and an unrestricted
    # day-of-week come up often: that is where expressions never fire.
    st.one_of(
        _items(1, 31, extra=DOM_EXTRA),
        _items(28, 31, extra=DOM_EXTRA),
        st.lists(st.sampled_from([29, 30, 31]).map(lambda d: Item("num", d)), min_size=1),
    ),
    st.one_of(_items(1, 12, names=MONTHS), SHORT_MONTHS, SHORT_MONTHS),
    st.one_of(
        st.just([Item("star")]),
        st.just([Item("star")]),
        _items(0, 7, names=WEEKDAYS, extra=WEEKDAY_EXTRA),
    ),
)


# The edge of never firing: the last days of February and 30-day months, with a
# day-of-week that is unrestricted, a starred step (both must match) or the nth/last.
edge_specs = st.builds(
    Spec,
    st.just([Item("num", 0)]),
    st.just([Item("num", 6)]),
    st.one_of(
        st.lists(st.sampled_from([29, 30, 31]).map(lambda d: Item("num", d)), min_size=1),
        st.builds(Item, st.just("star"), step=st.sampled_from([2, 7, 10, 14, 28, 29, 30])).map(
            lambda i: [i]
        ),
    ),
    SHORT_MONTHS,
    st.one_of(
        st.just([Item("star")]),
        st.builds(Item, st.just("star"), step=st.sampled_from([2, 3, 7])).map(lambda i: [i]),
        st.lists(WEEKDAY_EXTRA[1], min_size=1, max_size=2),
        st.lists(WEEKDAY_EXTRA[0], min_size=1, max_size=2),
    ),
)


# --- the oracle ---------------------------------------------------------------------------


def _set(items, low, high):
    out = set()
    for item in items:
        out |= item.values(low, high)
    return out


def _dom_matches(items, day: date) -> bool:
    last = calendar.monthrange(day.year, day.month)[1]
    for item in items:
        if item.kind == "last" and day.day == last:
            return True
        if item.kind == "lastweekday":
            final = date(day.year, day.month, last)
            while final.weekday() >= 5:
                final -= timedelta(days=1)
            if day == final:
                return True
        if item.kind in ("num", "star", "range") and day.day in item.values(1, 31):
            return True
    return False


def _dow_matches(items, day: date) -> bool:
    weekday = (day.weekday() + 1) % 7  # Sunday 0
    last = calendar.monthrange(day.year, day.month)[1]
    for item in items:
        if item.kind == "last" and item.a % 7 == weekday and day.day + 7 > last:
            return True
        if item.kind == "nth" and item.a % 7 == weekday and (day.day - 1) // 7 + 1 == item.b:
            return True
        if item.kind in ("num", "star", "range") and any(
            v % 7 == weekday for v in item.values(0, 7)
        ):
            return True
    return False


def _day_fires(spec: Spec, day: date, *, either: bool) -> bool:
    if day.month not in spec.months:
        return False
    dom, dow = _dom_matches(spec.dom, day), _dow_matches(spec.dow, day)
    return (dom or dow) if either else (dom and dow)


def _reads_either(spec: Spec) -> bool:
    texts = spec.texts()
    return not texts[2].startswith("*") and not texts[4].startswith("*")


def _valid(spec: Spec) -> bool:
    """Items the grammar takes: ranges ascending (drawn so), names of real months and days,
    no one-value range with a step (refused: cronsim and POSIX read it differently)."""
    items = spec.minute + spec.hour + spec.dom + spec.month + spec.dow
    return all(i.kind != "range" or i.a < i.b or (i.a == i.b and i.step == 1) for i in items)


# --- the property -------------------------------------------------------------------------


@settings(max_examples=oracle_examples(200), deadline=None)
@given(spec=st.one_of(specs, edge_specs).filter(_valid))
@example(
    spec=Spec(
        [Item("num", 0)], [Item("num", 0)], [Item("num", 30)], [Item("num", 2)], [Item("star")]
    )
)
@example(
    spec=Spec([Item("star")], [Item("num", 6)], [Item("star")], [Item("star")], [Item("star")])
)
@example(
    spec=Spec(
        [Item("num", 0)], [Item("num", 0)], [Item("star")], [Item("num", 2)], [Item("nth", 1, 5)]
    )
)
@example(
    spec=Spec(
        [Item("num", 0)], [Item("num", 0)], [Item("num", 29)], [Item("num", 2)], [Item("star")]
    )
)
@example(
    spec=Spec(
        [Item("num", 0)], [Item("num", 0)], [Item("num", 31)], [Item("num", 2)], [Item("last", 5)]
    )
)
def test_check_cron_agrees_with_the_brute_force_oracle(spec):
    expression = spec.expression()
    either = _reads_either(spec)
    fires = [d for d in CYCLE if _day_fires(spec, d, either=either)]
    try:
        checked = check_cron(expression)
    except CronRefused as refused:
        assert refused.rule == "cron_never_fires", (expression, str(refused))
        assert not fires, (expression, fires[:3])
        return
    assert fires, expression
    codes = {w.code for w in checked.warnings}

    minutes, hours = _set(spec.minute, 0, 59), _set(spec.hour, 0, 23)
    per_hour = [sum(1 for m in range(60) if m in minutes and h in hours) for h in range(24)]
    assert (EVERY_MINUTE_OF_FIXED_HOUR in codes) == (60 in per_hour and 0 in per_hour)

    both = {d for d in CYCLE if _day_fires(spec, d, either=False)}
    assert (DAY_OF_MONTH_OR_DAY_OF_WEEK in codes) == (either and set(fires) != both)

    years = {d.year for d in fires}
    assert (NOT_EVERY_YEAR in codes) == (len(years) < 28)

    # The deadline arithmetic (cronsim) finds a firing, on a day the oracle fires.
    start = datetime(2026, 1, 1, tzinfo=UTC)
    firing = next_deadline(expression, "UTC", start)
    # 2001-2099 repeat every 28 years (no century year between).
    assert firing.year < 2100
    same = date(firing.year - 28 * ((firing.year - 2001) // 28), firing.month, firing.day)
    assert same in set(fires), (expression, firing)
