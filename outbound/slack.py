"""Slack message text (incoming webhooks, ``mrkdwn``): the one place that escapes for Slack.

Slack reads ``<...>`` as a control sequence: ``<!channel>`` and ``<!here>`` notify a
whole channel, ``<@U123>`` a person, ``<https://x.example|click>`` shows "click" for any
address. So every piece of text that is not Tidemark's own markup goes through
``escape_text`` (``&``, ``<`` and ``>`` as ``&amp;``, ``&lt;`` and ``&gt;``, the only
escapes Slack decodes), and Tidemark's own links are built with ``link``, whose label is
escaped the same way. https://api.slack.com/reference/surfaces/formatting#escaping

Messages carry Block Kit ``blocks`` (``section``, ``context``) built from the same escaped
markup, and keep ``text`` as the fallback notifications and old clients show.
https://api.slack.com/reference/block-kit/blocks
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from .text import one_line, plain_lines

# In a link's address these would end it (``>``), open another (``<``), start its label
# (``|``) or break it (whitespace, control characters): they are percent-encoded.
_URL_BREAKERS = re.compile(r"[<>|\s\x00-\x1f\x7f]")
# A sequence starting with one of these is a mention (<!here>, <@U1>, <#C1>), not a link.
_MENTION_MARKS = ("!", "@", "#")
LABEL_MAX_CHARS = 200
# Block Kit's limits: a section's or a context element's text, elements in a context.
BLOCK_TEXT_MAX_CHARS = 3000
CONTEXT_ELEMENTS_MAX = 10


def escape_text(text: str) -> str:
    """``text`` as Slack shows it literally: ``&``, ``<`` and ``>`` as entities, so it can
    never mention a channel or a person, nor carry a link of its own. Slack's other
    formatting (``*bold*``, ``_italic_``...) is left alone: it cannot notify or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link(url: str, label: str | None = None) -> str:
    """A Slack link ``<url|label>`` to ``url``, showing ``label`` (default: the address).

    Args:
        url: an address Tidemark built (its own pages) or one to show as it is; ``<``,
            ``>``, ``|``, whitespace and control characters in it (and a leading ``!``,
            ``@`` or ``#``, which would make a mention) are percent-encoded and ``&``
            escaped, so it stays one link to that address.
        label: the text shown, escaped (``escape_text``) and folded to one line of at
            most ``LABEL_MAX_CHARS`` characters; user-supplied text is safe here. Nothing
            left to show: Slack shows the address.
    """
    address = _URL_BREAKERS.sub(lambda m: quote(m.group(), safe=""), url)
    if address[:1] in _MENTION_MARKS:  # <!channel|x> would notify a channel, not link
        address = quote(address[0], safe="") + address[1:]
    address = escape_text(address)
    shown = escape_text(one_line(label if label is not None else url, limit=LABEL_MAX_CHARS))
    return f"<{address}|{shown}>" if shown else f"<{address}>"


def code_block(text: str) -> str:
    """``text`` (any, possibly many lines) as a preformatted block of Slack markup: control
    characters dropped (``plain_lines``), escaped (``escape_text``), and a run of three
    backticks broken with zero-width spaces so it cannot close the block early."""
    inner = escape_text(plain_lines(text)).replace("```", "`\u200b`\u200b`")
    return f"```{inner}```"


def section(markup: str) -> dict:
    """A ``section`` block showing ``markup`` (Slack markup already built from
    ``escape_text``, ``link`` and ``code_block``), cut to ``BLOCK_TEXT_MAX_CHARS``."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(markup)}}


def context(elements: list[str]) -> dict:
    """A ``context`` block of small ``mrkdwn`` texts (Slack markup already built), at
    most ``CONTEXT_ELEMENTS_MAX`` of them."""
    return {
        "type": "context",
        "elements": [
            {"type": "mrkdwn", "text": _cut(markup)} for markup in elements[:CONTEXT_ELEMENTS_MAX]
        ],
    }


def _cut(markup: str) -> str:
    # Cut at a line end when one is near: a cut inside a link would break it.
    if len(markup) <= BLOCK_TEXT_MAX_CHARS:
        return markup
    cut = markup[: BLOCK_TEXT_MAX_CHARS - 1]
    return cut[: cut.rfind("\n")] if "\n" in cut else cut


def payload(text: str, blocks: list[dict] | None = None) -> bytes:
    """The JSON body of an incoming-webhook message whose ``text`` (the fallback) and
    ``blocks`` are already Slack markup (built from ``escape_text``, ``link``,
    ``section``, ``context``); no ``blocks`` key when there are none."""
    message: dict = {"text": text}
    if blocks:
        message["blocks"] = blocks
    return json.dumps(message).encode()
