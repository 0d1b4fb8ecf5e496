"""Checking a cron expression before it is accepted: precise errors, and warnings for
schedules that probably mean something else.

``check_cron(expression)`` either raises ``CronRefused`` naming the cron field (minute, hour,
day-of-month, month, day-of-week), the offending value and the allowed range or rule, or
returns the parsed schedule with a list of ``CronWarning`` (stable ``code``, a message with
a suggestion). The grammar is cronsim's (the library that computes the deadlines), read as
Vixie cron reads it:

- minute 0-59, hour 0-23, day-of-month 1-31 or ``L`` (last day) or ``LW`` (last weekday),
  month 1-12 or JAN-DEC, day-of-week 0-7 (0 and 7 are Sunday) or SUN-SAT, ``5L`` (last
  Friday of the month) and ``MON#2`` (second Monday); ``*``, ``a-b``, ``/step`` and lists.
- When neither day-of-month nor day-of-week starts with ``*``, a day matches if it matches
  *either* (POSIX and Vixie cron); otherwise it must match both.

Whether an expression ever fires is decided exactly, without a clock: whether a day
matches depends only on its month, the month's length, the weekday of the month's first
day and the day's number, and every such combination occurs in the Gregorian calendar
(the 28 years 2001-2028 hold each of the 14 kinds of year: leap or not, starting on each
weekday). So the check walks one representative month of each kind (at most 13 months x
7 weekdays x 31 days), with cronsim's own day rule.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from cronsim import CronSim, CronSimError
from cronsim.cronsim import Field

from problems import FieldError, FieldWarning

from .deadlines import CRON_FIELDS, CronError

MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK = (
    "minute",
    "hour",
    "day-of-month",
    "month",
    "day-of-week",
)
FIELD_NAMES = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)

MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

# What each field allows, as the error messages say it.
ALLOWED = {
    MINUTE: "0-59",
    HOUR: "0-23",
    DAY_OF_MONTH: "1-31, L (last day) or LW (last weekday)",
    MONTH: "1-12 or JAN-DEC",
    DAY_OF_WEEK: "0-7 (0 and 7 are Sunday) or SUN-SAT, 5L (last Friday), MON#2 (nth weekday, 1-5)",
}
_BOUNDS = {
    MINUTE: (0, 59),
    HOUR: (0, 23),
    DAY_OF_MONTH: (1, 31),
    MONTH: (1, 12),
    DAY_OF_WEEK: (0, 7),
}
_CRONSIM_FIELD = {
    MINUTE: Field.MINUTE,
    HOUR: Field.HOUR,
    DAY_OF_MONTH: Field.DAY,
    MONTH: Field.MONTH,
    DAY_OF_WEEK: Field.DOW,
}

# Warning codes (stable: clients match on them).
EVERY_MINUTE_OF_FIXED_HOUR = "every_minute_of_fixed_hour"
DAY_OF_MONTH_OR_DAY_OF_WEEK = "day_of_month_or_day_of_week"
NOT_EVERY_YEAR = "not_every_year"
WARNING_CODES = (EVERY_MINUTE_OF_FIXED_HOUR, DAY_OF_MONTH_OR_DAY_OF_WEEK, NOT_EVERY_YEAR)

# Refusal rules (the ``rule`` of a field error).
RULE_SYNTAX = "cron_expression"
RULE_NEVER_FIRES = "cron_never_fires"


class CronRefused(CronError):
    """The expression is refused.

    Attributes:
        rule: ``cron_expression`` (syntax or range) or ``cron_never_fires``.
        cron_field: the cron field at fault (``minute`` ... ``day-of-week``), or None when
            the expression as a whole is (field count, never fires across fields).
        value: the offending text (a field, one term of it, or the expression).
    """

    def __init__(self, message: str, *, rule: str, cron_field: str | None, value: str):
        super().__init__(message)
        self.rule = rule
        self.cron_field = cron_field
        self.value = value


@dataclass(frozen=True)
class CronWarning:
    """A schedule that is valid but probably means something else.

    ``code`` is one of ``WARNING_CODES``; ``message`` says what it does and what to write
    instead."""

    code: str
    message: str


@dataclass(frozen=True)
class CheckedCron:
    """An accepted expression: its five field texts as written,
    the minutes and hours it fires at, and its warnings (possibly none)."""

    expression: str
    fields: tuple[str, str, str, str, str]
    minutes: frozenset[int]
    hours: frozenset[int]
    warnings: tuple[CronWarning, ...]


def check_cron(expression: str) -> CheckedCron:
    """Check a five-field cron expression.

    Returns:
        ``CheckedCron`` with its warnings (``every_minute_of_fixed_hour``,
        ``day_of_month_or_day_of_week``, ``not_every_year``).

    Raises:
        CronRefused: a field is malformed or out of range (naming the field, the value
            and the allowed range), the field count is not five, or the expression never
            fires (``rule == "cron_never_fires"``).
    """
    parts = expression.split()
    if len(parts) != CRON_FIELDS:
        raise CronRefused(
            f"expected {CRON_FIELDS} fields (minute hour day-of-month month day-of-week), "
            f"got {len(parts)} in {expression!r}",
            rule=RULE_SYNTAX,
            cron_field=None,
            value=expression,
        )
    fields = tuple(parts)
    sets = {}
    for name, text in zip(FIELD_NAMES, fields, strict=True):
        for term in text.split(","):
            _check_term(name, text, term)
        try:
            sets[name] = _CRONSIM_FIELD[name].parse(text.upper())
        except (CronSimError, AssertionError, ValueError) as exc:  # pragma: no cover
            raise _refused(name, text, f"is not valid; allowed: {ALLOWED[name]}") from exc
    days = _Days(
        fields[2].upper(), fields[4].upper(), sets[DAY_OF_MONTH], sets[MONTH], sets[DAY_OF_WEEK]
    )
    if not days.fires_in_some_year():
        raise CronRefused(
            f"never fires: {days.why_never()}",
            rule=RULE_NEVER_FIRES,
            cron_field=DAY_OF_MONTH if fields[4] == "*" else None,
            value=expression,
        )
    try:
        # The library that computes the deadlines agrees.
        CronSim(expression, datetime(2001, 1, 1, tzinfo=UTC))
    except CronSimError as exc:  # pragma: no cover - every refusal of cronsim is caught above
        raise CronRefused(str(exc), rule=RULE_SYNTAX, cron_field=None, value=expression) from exc
    minutes, hours = frozenset(sets[MINUTE]), frozenset(sets[HOUR])
    warnings = []
    if len(minutes) == 60 and len(hours) < 24:
        warnings.append(_every_minute_warning(fields, hours))
    if days.either_reading_differs():
        warnings.append(_either_warning(fields))
    if days.not_every_year():
        warnings.append(_not_every_year_warning(days))
    return CheckedCron(expression, fields, minutes, hours, tuple(warnings))


def validate_cron(expression: str) -> None:
    """Raise CronRefused (a CronError) unless ``check_cron`` accepts ``expression``."""
    check_cron(expression)


def warnings_of(expression: str) -> tuple[CronWarning, ...]:
    """The warnings of an expression ``check_cron`` accepts; none for one it refuses (its
    refusal is reported where it is validated)."""
    try:
        return check_cron(expression).warnings
    except CronError:
        return ()


# --- syntax -------------------------------------------------------------------------------


def _refused(name: str, text: str, what: str, term: str | None = None) -> CronRefused:
    subject = f"{name} field {text!r}"
    if term is not None and term != text:
        subject += f": {term!r}"
    return CronRefused(f"{subject} {what}", rule=RULE_SYNTAX, cron_field=name, value=term or text)


def _check_term(name: str, text: str, term: str) -> None:
    """Raise CronRefused unless ``term`` (one comma-separated item) is in cronsim's grammar
    for the field, with a message that names the rule it breaks."""
    if term == "":
        raise _refused(name, text, "has an empty list item", term)
    if term == "*":
        return
    if "?" in term:
        raise _refused(name, text, "uses '?', which is not supported: write '*'", term)
    if name == DAY_OF_WEEK and "L" in term.upper():
        match = re.fullmatch(r"(\d+)L", term, re.IGNORECASE)
        if match is None:
            raise _refused(
                name,
                text,
                "is not valid: 'L' follows a weekday number 0-7 (5L: last Friday)",
                term,
            )
        _number(name, text, match.group(1))
        return
    if "#" in term:
        if name != DAY_OF_WEEK:
            raise _refused(name, text, "uses '#', which only day-of-week allows (MON#2)", term)
        weekday, nth = term.split("#", 1)
        _value(name, text, weekday)
        if not nth.isdigit() or not 1 <= int(nth) <= 5:
            raise _refused(name, text, f"has nth {nth!r}; the nth weekday is 1-5", term)
        return
    if "/" in term:
        start, step = term.split("/", 1)
        if not step.isdigit() or int(step) == 0:
            raise _refused(name, text, f"has step {step!r}; a step is a whole number from 1", term)
        if start.upper() in ("L", "LW"):
            raise _refused(name, text, f"steps {start!r}, which takes no step", term)
        if start != "*":
            _range_or_value(name, text, start)
            low_text, _, high_text = start.partition("-")
            if high_text and _value(name, text, low_text) == _value(name, text, high_text):
                # cronsim reads a one-value range with a step as "from there, every step"
                # (5-5/10: 5, 15, 25, ...), POSIX as the one value: say it, do not guess.
                raise _refused(
                    name,
                    text,
                    f"is a one-value range with a step, read as every {step} from "
                    f"{low_text}: write '{low_text}' for the one value or "
                    f"'{low_text}/{step}' for every {step} from it",
                    term,
                )
        return
    if name == DAY_OF_MONTH and term.upper() in ("L", "LW"):
        return
    if "W" in term.upper() and name == DAY_OF_MONTH:
        raise _refused(
            name, text, "uses 'W' (nearest weekday), supported only as 'LW' (last weekday)", term
        )
    if "L" in term.upper() and name in (MINUTE, HOUR, DAY_OF_MONTH):
        raise _refused(
            name,
            text,
            "uses 'L', which only day-of-month (L, LW) and day-of-week (5L) allow",
            term,
        )
    _range_or_value(name, text, term)


def _range_or_value(name: str, text: str, term: str) -> None:
    if "-" in term:
        low_text, high_text = term.split("-", 1)
        if not low_text or not high_text:
            raise _refused(name, text, "is not a range: write low-high, e.g. 1-5", term)
        low, high = _value(name, text, low_text), _value(name, text, high_text)
        if high < low:
            top = _BOUNDS[name][1]
            bottom = _BOUNDS[name][0]
            raise _refused(
                name,
                text,
                f"is a range that runs backwards ({low} > {high}); ranges do not wrap: "
                f"write '{low_text}-{top},{bottom}-{high_text}'",
                term,
            )
        return
    _value(name, text, term)


def _value(name: str, text: str, term: str) -> int:
    """One value: a number in the field's range, or a month or weekday name."""
    if name == MONTH and term.upper() in MONTH_NAMES:
        return MONTH_NAMES.index(term.upper()) + 1
    if name == DAY_OF_WEEK and term.upper() in DAY_NAMES:
        return DAY_NAMES.index(term.upper())
    return _number(name, text, term)


def _number(name: str, text: str, term: str) -> int:
    low, high = _BOUNDS[name]
    if not term.isdigit() or not term.isascii():
        raise _refused(name, text, f"is not a number or name; allowed: {ALLOWED[name]}", term)
    value = int(term)
    if not low <= value <= high:
        raise _refused(name, text, f"is out of range {low}-{high}", term)
    return value


# --- days ---------------------------------------------------------------------------------


def _month_kinds() -> dict[tuple[int, int, int], date]:
    """(month, days in it, weekday of its first day) -> the first of one such month, over
    2001-2028 (every kind of Gregorian year occurs there)."""
    kinds: dict[tuple[int, int, int], date] = {}
    for year in range(2001, 2029):
        for month in range(1, 13):
            first_weekday, length = calendar.monthrange(year, month)
            kinds.setdefault((month, length, first_weekday), date(year, month, 1))
    return kinds


_MONTH_KINDS = _month_kinds()
# The 14 kinds of year, each as one year of 2001-2028 (leap, weekday of 1 January).
_YEAR_KINDS = {(calendar.isleap(y), date(y, 1, 1).weekday()): y for y in range(2001, 2029)}


class _Days:
    """Which days an expression's day-of-month, month and day-of-week fields match, per
    kind of month, read with cronsim's own day rule."""

    def __init__(self, dom_text: str, dow_text: str, days: set, months: set, weekdays: set):
        self.dom_text, self.dow_text = dom_text, dow_text
        self.months = months
        self.either = not (dom_text.startswith("*") or dow_text.startswith("*"))
        self._read = {reading: self._matcher(days, weekdays, reading) for reading in (0, 1)}
        self._cache: dict[tuple[int, int, int, bool], frozenset[int]] = {}

    @staticmethod
    def _matcher(days: set, weekdays: set, both: int):
        # cronsim's day rule without its constructor, which refuses some expressions that
        # never fire with only "Bad day-of-month": the rule, not the refusal, is wanted.
        sim = CronSim.__new__(CronSim)
        sim.days, sim.weekdays, sim.day_and = days, weekdays, bool(both)
        return sim.match_day

    def matching(self, kind: tuple[int, int, int], *, both: bool) -> frozenset[int]:
        """Day numbers matched in a month of ``kind``; ``both``: read as day-of-month AND
        day-of-week (else as the expression reads)."""
        key = (*kind, both)
        if key not in self._cache:
            first = _MONTH_KINDS[kind]
            match = self._read[1 if both or not self.either else 0]
            self._cache[key] = frozenset(
                d for d in range(1, kind[1] + 1) if match(first.replace(day=d))
            )
        return self._cache[key]

    def _kinds(self):
        return (k for k in _MONTH_KINDS if k[0] in self.months)

    def fires_in_some_year(self) -> bool:
        return any(self.matching(k, both=False) for k in self._kinds())

    def either_reading_differs(self) -> bool:
        """Read as OR (both fields restricted), some day matches that AND would not."""
        return self.either and any(
            self.matching(k, both=False) != self.matching(k, both=True) for k in self._kinds()
        )

    def years_without(self) -> list[tuple[bool, int]]:
        """The kinds of year (leap, weekday of 1 January) with no matching day."""
        missing = []
        for (leap, weekday), year in _YEAR_KINDS.items():
            kinds = (
                (m, calendar.monthrange(year, m)[1], calendar.monthrange(year, m)[0])
                for m in self.months
            )
            if not any(self.matching(k, both=False) for k in kinds):
                missing.append((leap, weekday))
        return missing

    def not_every_year(self) -> bool:
        return bool(self.years_without())

    def why_never(self) -> str:
        months = sorted(self.months)
        names = ", ".join(calendar.month_name[m] for m in months)
        if self.dow_text == "*" and not self.dom_text.startswith("L"):
            longest = max(length for m, length, _ in _MONTH_KINDS if m in self.months)
            leap = " (29 February counted)" if longest == 29 else ""
            return (
                f"day-of-month {self.dom_text!r} never falls in month {names}: "
                f"at most {longest} days{leap}"
            )
        return (
            f"no day in month {names} matches both day-of-month {self.dom_text!r} and "
            f"day-of-week {self.dow_text!r}, in any year"
        )


# --- warnings ----------------------------------------------------------------------------


def _every_minute_warning(fields: tuple[str, ...], hours: frozenset[int]) -> CronWarning:
    shown = ", ".join(f"{h:02d}:00-{h:02d}:59" for h in sorted(hours)[:3])
    if len(hours) > 3:
        shown += ", ..."
    fixed = " ".join(("0", *fields[1:]))
    return CronWarning(
        EVERY_MINUTE_OF_FIXED_HOUR,
        f"minute is {fields[0]!r} with hour {fields[1]!r}: this fires every minute of "
        f"{shown} ({60 * len(hours)} times a day), not once; for one deadline at the start "
        f"of the hour write '{fixed}'",
    )


def _either_warning(fields: tuple[str, ...]) -> CronWarning:
    dom, dow = fields[2], fields[4]
    first = dow.upper().split(",")[0].split("-")[0].split("/")[0].split("#")[0].rstrip("L")
    number = str(DAY_NAMES.index(first)) if first in DAY_NAMES else first
    if not number.isdigit():
        first, number = "MON", "1"
    return CronWarning(
        DAY_OF_MONTH_OR_DAY_OF_WEEK,
        f"day-of-month {dom!r} and day-of-week {dow!r} are both restricted, so cron fires "
        "on days matching either one (POSIX/Vixie cron reads them as OR), not only on days "
        f"matching both; for the nth weekday of the month write day-of-month '*' and "
        f"day-of-week '{first}#1' (first), '{first}#2' ..., or '{number}L' (last); "
        "otherwise keep only one of the two restrictions",
    )


def _not_every_year_warning(days: _Days) -> CronWarning:
    missing = days.years_without()
    if sorted(leap for leap, _ in missing) == [False] * 7:
        what = "only in leap years"
    else:
        # In 28 years, each leap kind of year occurs once and each other kind three times.
        years = 28 - sum(1 if leap else 3 for leap, _ in missing)
        what = f"only in some years (about {years} in 28)"
    return CronWarning(
        NOT_EVERY_YEAR,
        f"day-of-month {days.dom_text!r}, month and day-of-week {days.dow_text!r} match "
        f"{what}: some years have no deadline at all",
    )


def field_problem(field: str, expression: str) -> FieldError | None:
    """The error of an input field holding a cron (``sla_cron``, ``cron``, ``start_cron``),
    or None when ``check_cron`` accepts it. The detail names the cron field, the value and
    the allowed range ("minute field '75' is out of range 0-59"; a problem's detail puts
    the input field before it); the rule is ``cron_expression`` or ``cron_never_fires``."""
    try:
        check_cron(expression)
    except CronError as exc:
        return FieldError(field, str(exc), getattr(exc, "rule", RULE_SYNTAX))
    return None


def field_warnings(field: str, expression: str) -> list[FieldWarning]:
    """The warnings of an input field's accepted cron (none for a blank or refused one)."""
    if not expression:
        return []
    return [FieldWarning(w.code, field, w.message) for w in warnings_of(expression)]
