"""A logged ping path keeps only the first 8 characters of its UUID or ping key."""

import logging

import pytest

from httpkit.logsafe import RedactPingSecrets, redact

KEY = "6f9619ff-8b86-d011-b42d-00cf4fc964ff"


@pytest.mark.parametrize(
    ("text", "logged"),
    [
        (f"Too Many Requests: /ping/{KEY}", "Too Many Requests: /ping/6f9619ff…"),
        (f"Bad Request: /ping/{KEY}/start?rid=x", "Bad Request: /ping/6f9619ff…/start?rid=x"),
        (
            "Not Found: /ping/abcdefghijklmnopqrstuv/db-backup",
            "Not Found: /ping/abcdefgh…/db-backup",
        ),
        ("Not Found: /api/v1/monitors/7", "Not Found: /api/v1/monitors/7"),
    ],
)
def test_redact_cuts_ping_secrets(text, logged):
    assert redact(text) == logged


def test_the_console_handler_filter_redacts_django_request_records():
    record = logging.LogRecord(
        "django.request",
        logging.WARNING,
        __file__,
        1,
        "%s: %s",
        ("Too Many Requests", f"/ping/{KEY}"),
        None,
    )
    assert RedactPingSecrets().filter(record)
    assert record.getMessage() == "Too Many Requests: /ping/6f9619ff…"
    assert KEY not in record.getMessage()


def test_the_configured_console_handler_has_the_filter():
    from django.conf import settings

    assert "ping_secrets" in settings.LOGGING["handlers"]["console"]["filters"]
    handler = next(h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler))
    assert any(isinstance(f, RedactPingSecrets) for f in handler.filters)


def test_the_filter_redacts_structlog_event_dicts_and_mapping_args():
    event = logging.LogRecord("tidemark.access", logging.INFO, __file__, 1, {}, None, None)
    event.msg = {"event": "request", "path": f"/ping/{KEY}", "status": 404}
    mapping = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, "%(r)s", None, None)
    mapping.args = {"r": f"GET /ping/{KEY} HTTP/1.1", "s": 200}
    assert RedactPingSecrets().filter(event) and RedactPingSecrets().filter(mapping)
    assert event.msg == {"event": "request", "path": "/ping/6f9619ff…", "status": 404}
    assert mapping.getMessage() == "GET /ping/6f9619ff… HTTP/1.1"
