"""Email text: what user-supplied words may become in a message's headers and body.

A header carrying CR or LF could add headers of its own (``Bcc:``...); Django refuses
such a subject with ``BadHeaderError`` and the message would never be sent. So every
subject is folded to one line and cut here, before it reaches the mail backend, and every
body is plain text (``text/plain``, never HTML). Pure, for the catalog's owner notices and
the watchdog's email channel alike.
"""

from __future__ import annotations

from .text import one_line, plain_lines

# Long enough for a dataset name and a partition; RFC 5322 2.1.1 asks lines to stay under
# 78 characters where possible, and mail clients show about this much of a subject.
SUBJECT_MAX_CHARS = 200


def subject(text: str) -> str:
    """A ``Subject`` header value from ``text``: one line (every line break and run of
    whitespace folded to a space, control characters dropped), at most
    ``SUBJECT_MAX_CHARS`` characters (``…`` marks a cut)."""
    return one_line(text, limit=SUBJECT_MAX_CHARS)


def body(text: str) -> str:
    """A plain-text body from ``text``: lines kept (every line break as ``\\n``), control
    characters other than tab dropped."""
    return plain_lines(text)
