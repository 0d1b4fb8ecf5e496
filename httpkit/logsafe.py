"""Log records without secrets: a ping URL's UUID or ping key is its only credential, so a
logged request path (Django logs every 4xx and 5xx answer, e.g. ``Too Many Requests:
/ping/<uuid>``) keeps only its first 8 characters."""

from __future__ import annotations

import logging
import re

_PING_SECRET = re.compile(r"(/ping/)([^/?#\s]{8})[^/?#\s]*")


def redact(text: str) -> str:
    """``text`` with each ``/ping/<secret>`` cut to its first 8 characters and ``…``."""
    return _PING_SECRET.sub(r"\1\2…", text)


class RedactPingSecrets(logging.Filter):
    """A logging filter: redacts ping secrets in a record's message and string args (a
    tuple, or a mapping), and
    in the string values of a structlog record's event dict (its ``msg``, before
    ``httpkit.logs``' formatter renders it as plain text or JSON)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        elif isinstance(record.msg, dict):
            record.msg = {key: _redacted(value) for key, value in record.msg.items()}
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(arg) for arg in record.args)
        elif isinstance(record.args, dict):  # "%(name)s" formats, as gunicorn's access log
            record.args = {key: _redacted(value) for key, value in record.args.items()}
        return True


def _redacted(value):
    return redact(value) if isinstance(value, str) else value
