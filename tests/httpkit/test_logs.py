"""Log rendering (``httpkit.logs``): each test starts a fresh interpreter with the real
settings and ``TIDEMARK_LOG_FORMAT`` as the environment gives it, logs what Django, Celery
and Tidemark log, and reads what reached standard error. No database is needed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from httpkit.logs import formatter, render_plain

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
KEY = "6f9619ff-8b86-d011-b42d-00cf4fc964ff"

# Logged by the child: a stdlib record with a ping path (as django.request logs a 404), a
# Celery record, a structlog record with a bound request id and a secret in a field, and
# an exception.
SCRIPT = f"""
import logging, django, structlog
django.setup()
structlog.contextvars.bind_contextvars(request_id="req-1")
logging.getLogger("django.request").warning("%s: %s", "Not Found", "/ping/{KEY}")
logging.getLogger("celery.worker.strategy").info("Task %s received", "catalog.tasks.x")
structlog.get_logger("tidemark.access").info("request", path="/ping/{KEY}/start", status=404)
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("catalog.tasks").exception("the pass failed")
"""

PLAIN_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) [\w.]+ .*")


def _stderr(log_format: str | None, settings_module: str = "config.settings.test") -> str:
    env = {k: v for k, v in os.environ.items() if k != "TIDEMARK_LOG_FORMAT"}
    env.update(DJANGO_SETTINGS_MODULE=settings_module, TIDEMARK_IGNORE_DOTENV="1")
    if log_format is not None:
        env["TIDEMARK_LOG_FORMAT"] = log_format
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


# The catalog's processes (web, Celery) and the watchdog's (its loop and server).
@pytest.mark.parametrize("settings_module", ["config.settings.test", "config.settings.watchdog"])
def test_json_renders_every_record_as_one_object_per_line(settings_module):
    lines = [json.loads(line) for line in _stderr("json", settings_module).splitlines()]
    assert [(line["logger"], line["level"]) for line in lines] == [
        ("django.request", "warning"),
        ("celery.worker.strategy", "info"),
        ("tidemark.access", "info"),
        ("catalog.tasks", "error"),
    ]
    assert all(line["request_id"] == "req-1" for line in lines)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", line["timestamp"]) for line in lines)
    _, celery_line, access, failure = lines
    assert celery_line["event"] == "Task catalog.tasks.x received"
    assert access["event"] == "request" and access["status"] == 404
    assert failure["event"] == "the pass failed"
    assert failure["exception"].startswith("Traceback")
    assert "ZeroDivisionError" in failure["exception"]


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_ping_secrets_are_redacted_in_either_format(log_format):
    output = _stderr(log_format)
    assert KEY not in output
    if log_format == "plain":
        assert output.count("/ping/6f9619ff…") == 2
    else:
        lines = [json.loads(line) for line in output.splitlines()]
        assert lines[0]["event"] == "Not Found: /ping/6f9619ff…"
        assert lines[2]["path"] == "/ping/6f9619ff…/start"


def test_plain_is_the_default_and_keeps_its_layout():
    lines = _stderr(None).splitlines()
    assert PLAIN_LINE.fullmatch(lines[0]), lines[0]
    assert lines[0].endswith(" WARNING django.request Not Found: /ping/6f9619ff… request_id=req-1")
    assert lines[1].endswith(
        " INFO celery.worker.strategy Task catalog.tasks.x received request_id=req-1"
    )
    assert lines[2].endswith(
        " INFO tidemark.access request path=/ping/6f9619ff…/start request_id=req-1 status=404"
    )
    assert lines[3].endswith(" ERROR catalog.tasks the pass failed request_id=req-1")
    assert lines[4] == "Traceback (most recent call last):"
    assert lines[-1] == "ZeroDivisionError: division by zero"


def test_an_unknown_format_stops_the_process():
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.test", TIDEMARK_LOG_FORMAT="xml")
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "TIDEMARK_LOG_FORMAT must be one of plain, json: 'xml'" in done.stderr
    with pytest.raises(ValueError, match="plain, json"):
        formatter("xml")


@pytest.mark.parametrize(
    ("event_dict", "rendered"),
    [
        ({"event": "hello"}, "hello"),
        ({"event": "request", "status": 200, "method": "GET"}, "request method=GET status=200"),
        ({"event": "x", "reason": "two words", "empty": ""}, "x empty='' reason='two words'"),
        ({"event": "x", "level": "info", "logger": "a", "timestamp": "t"}, "x"),
        ({"event": "x", "exception": "Traceback\nE"}, "x\nTraceback\nE"),
    ],
)
def test_render_plain(event_dict, rendered):
    assert render_plain(None, "info", event_dict) == rendered
