"""How a Slack client reads message text, stated simply: the oracle for ``outbound.slack``.

Slack treats ``<...>`` as a control sequence (``<!channel>``, ``<@U1>``, ``<#C1>``: a
mention; anything else a link, ``<address|label>``) and decodes exactly three entities,
``&amp;``, ``&lt;`` and ``&gt;`` (https://api.slack.com/reference/surfaces/formatting).
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(r"<([^<>]*)>")
_ENTITY = re.compile(r"&(amp|lt|gt);")
_DECODED = {"amp": "&", "lt": "<", "gt": ">"}


def decode(text: str) -> str:
    """The three entities decoded in one pass (``&amp;lt;`` is ``&lt;``, not ``<``)."""
    return _ENTITY.sub(lambda m: _DECODED[m.group(1)], text)


def read(text: str) -> list[tuple]:
    """``text`` as Slack shows it: ``("text", str)``, ``("mention", target)`` and
    ``("link", address, label or None)`` tokens, in order."""
    tokens: list[tuple] = []
    position = 0
    for match in _SEQUENCE.finditer(text):
        if match.start() > position:
            tokens.append(("text", decode(text[position : match.start()])))
        target, bar, label = match.group(1).partition("|")
        if target[:1] in ("!", "@", "#"):
            tokens.append(("mention", decode(target)))
        else:
            tokens.append(("link", decode(target), decode(label) if bar else None))
        position = match.end()
    if position < len(text):
        tokens.append(("text", decode(text[position:])))
    return tokens


def controls(text: str) -> list[tuple]:
    """Only the mentions and links Slack finds in ``text``."""
    return [token for token in read(text) if token[0] != "text"]
