"""The value a client sent at an input error's field, for a validation problem's errors.

A validation problem's ``errors[]`` name the field, the rule and a detail; DRF's own
details ("Enter a valid URL.", "A valid integer is required.") do not say which value was
refused, which matters when a list or a nested object held several. The exception handler
(``httpkit.exceptions``) adds to each error the ``value`` found at its path in what the
client sent (``sent_value``), and names it in the detail when the detail does not already
(``detail_naming``): ``Enter a valid URL (got 'htp:/x').``

Only scalars are shown (a string, number, boolean or null), a string cut at 100
characters as ``problems.choice_detail`` cuts it. Never shown: the value of a missing field
(rule ``required``: there is none), of a field whose name says it holds a secret
(``is_secret_path``), and the credentials of a URL (``https://***@host/...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from problems.core import shown_text

Path = tuple[str | int, ...]

# What ``sent_value`` answers for a path that holds nothing (``None`` is JSON's null).
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()

# Field names that say they hold a secret (compared lower-cased, "-" read as "_"): the
# API's signing secrets (``endpoint_secret``), API and watchdog tokens, passwords, the
# ``Authorization`` header, and keys (an API key, a watchdog ``ping_key``, a PagerDuty
# routing key, which are all secrets; an idempotency key loses its echo, a small cost).
SECRET_NAMES = frozenset({"secret", "token", "password", "passphrase", "authorization", "key"})
SECRET_SUFFIXES = ("_secret", "_token", "_password", "_key")

# A long value counts as named in a detail when its first characters are there: our own
# details cut what they quote (``InstantField`` at 60 characters).
_NAMED_PREFIX = 50
_SEGMENT = re.compile(r"[^.\[\]]+")
_URL_CREDENTIALS = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@")


def path_of(field: str) -> Path:
    """A dotted field path as its segments: ``endpoints.0.url`` and
    ``datasets[0].url`` are ``("endpoints", "0", "url")`` and ``("datasets", "0", "url")``
    (a digit segment indexes a list and keys a mapping alike, see ``sent_value``)."""
    return tuple(_SEGMENT.findall(field))


def is_secret_path(path: Iterable[str | int]) -> bool:
    """Whether any segment of ``path`` names a secret (``SECRET_NAMES``, or ends in one of
    ``SECRET_SUFFIXES``): ``endpoint_secret``, ``channels.0.api_key``, ``Authorization``."""
    for segment in path:
        if not isinstance(segment, str):
            continue
        name = segment.lower().replace("-", "_")
        if name in SECRET_NAMES or name.endswith(SECRET_SUFFIXES):
            return True
    return False


def sent_value(data: Any, path: Sequence[str | int]) -> Any:
    """What ``data`` (a parsed body, or a query's ``QueryDict``) holds at ``path``, or
    ``MISSING``.

    A mapping is keyed by the segment (an int segment also as its text: DRF keys a
    ``ListField``'s errors by int, a ``DictField``'s by text); a list is indexed by an int
    or a digit string (no negative index). A ``QueryDict`` (anything with ``getlist``)
    answers a name repeated in the query as the list of its values, and a name given once
    as its one value, as DRF's fields read it.
    """
    node = data
    for segment in path:
        if hasattr(node, "getlist"):
            if not isinstance(segment, str) or segment not in node:
                return MISSING
            values = node.getlist(segment)
            node = values[0] if len(values) == 1 else list(values)
        elif isinstance(node, Mapping):
            if segment in node:
                node = node[segment]
            elif not isinstance(segment, str) and str(segment) in node:
                node = node[str(segment)]
            else:
                return MISSING
        elif isinstance(node, list | tuple):
            index = segment if isinstance(segment, int) else _index(segment)
            if index is None or not 0 <= index < len(node):
                return MISSING
            node = node[index]
        else:
            return MISSING
    return node


def _index(segment: str) -> int | None:
    return int(segment) if segment.isascii() and segment.isdigit() else None


def is_scalar(value: Any) -> bool:
    """A JSON scalar: a string, a number, a boolean or null."""
    return value is None or isinstance(value, str | int | float | bool)


def shown_value(value: Any) -> Any:
    """``value`` as an error's ``value`` member: a string cut at 100 characters (and its
    URL credentials hidden, ``https://***@host``), any other scalar as it is."""
    if isinstance(value, str):
        return shown_text(_URL_CREDENTIALS.sub(r"\1***@", value))
    return value


def value_text(value: Any) -> str:
    """A shown value as a detail quotes it: a string in quotes (``'htp:/x'``), a boolean
    or null as JSON writes it (``true``, ``null``), a number as it is."""
    if isinstance(value, str):
        return repr(value)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def names_value(detail: str, value: Any) -> bool:
    """Whether ``detail`` already names the sent ``value``: its text is there as a whole
    token (``1`` is not found in ``100``), quoted or not; for a value over 50 characters,
    its first 50 characters are there; an empty string always counts as named."""
    if isinstance(value, str):
        text = value
    elif value is None or isinstance(value, bool):
        text = value_text(value)
    else:
        text = str(value)
    if len(text) > _NAMED_PREFIX:
        return text[:_NAMED_PREFIX] in detail
    return re.search(rf"(?<!\w){re.escape(text)}(?!\w)", detail) is not None


def detail_naming(detail: str, value: Any) -> str:
    """``detail`` with the shown ``value`` at its end, before a final period:
    ``Enter a valid URL.`` becomes ``Enter a valid URL (got 'htp:/x').``."""
    got = f" (got {value_text(value)})"
    if detail.endswith("."):
        return f"{detail[:-1]}{got}."
    return detail + got


def value_member(path: Path, rule: str, sources: Sequence[Any]) -> Any:
    """The ``value`` member of the error at ``path`` (rule ``rule``), or ``MISSING`` when
    it has none: a required field's (nothing was sent), a secret's, a non-scalar's, one
    found in no source, or one found with different values in two sources (a body field
    and a query parameter of the same name: which one was refused is unknown).

    Args:
        path: the field's segments; ``()`` (the whole body) never has one.
        rule: the error's rule code.
        sources: what the client sent, in order (the parsed body, the query's
            ``QueryDict``); a source that is None is skipped.
    """
    if not path or rule == "required" or is_secret_path(path):
        return MISSING
    found = [v for s in sources if s is not None and (v := sent_value(s, path)) is not MISSING]
    if not found or any(v != found[0] or type(v) is not type(found[0]) for v in found):
        return MISSING
    return shown_value(found[0]) if is_scalar(found[0]) else MISSING
