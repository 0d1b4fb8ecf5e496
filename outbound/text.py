"""Plain text for another system's one-line fields (a mail header, a PagerDuty summary).

Pure: the catalog and the watchdog fold user-supplied text the same way.
"""

from __future__ import annotations

import unicodedata

ELLIPSIS = "\u2026"
# Bidirectional embeddings, overrides, isolates and marks: they make a line read other
# than it is ("Trojan Source", CVE-2021-42574), so a one-line field drops them.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
# Control characters (Cc) and lone surrogates (Cs: leniently decoded bytes) cannot be
# encoded into a header; whitespace among the controls is folded instead.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cs"})


def _printable(char: str) -> bool:
    return unicodedata.category(char) not in _DROPPED_CATEGORIES and char not in _BIDI_CONTROLS


def one_line(text: str, *, limit: int) -> str:
    """``text`` as one line of at most ``limit`` characters.

    Every run of whitespace (space, tab, CR, LF, vertical tab, form feed, the file/group/
    record separators, NEL, U+2028 and U+2029: everything ``str.splitlines`` breaks on)
    becomes one space, so no line break survives; other control characters, lone
    surrogates and bidirectional controls are dropped; the ends are stripped. Text longer
    than ``limit`` is cut and ends with an ellipsis (``…``), within the limit.

    Args:
        text: any text, typically user-supplied.
        limit: the most characters (code points) the line may have, at least 1.
    """
    line = " ".join("".join(c for c in text if c.isspace() or _printable(c)).split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + ELLIPSIS
    return line


def plain_lines(text: str) -> str:
    """``text`` as plain multi-line text: line breaks become ``\\n`` (CRLF, CR, NEL,
    U+2028 and U+2029 included), other control characters (tab excepted) and lone
    surrogates are dropped. For a mail body or any other text/plain part."""
    return "\n".join(
        "".join(c for c in line if c == "\t" or _printable(c)) for line in text.splitlines()
    )
