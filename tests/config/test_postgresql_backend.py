"""The PostgreSQL backend's health checks (``config/postgresql``), against real PostgreSQL:
a connection idle longer than ``HEALTH_CHECK_DELAY`` is checked before reuse and replaced
when its server session is gone; one used more recently is reused without a check."""

from __future__ import annotations

import time

import pytest
from django.db import OperationalError, connection, connections

pytestmark = pytest.mark.django_db


def _new_wrapper():
    db = connections.create_connection("default")
    db.settings_dict = {**db.settings_dict}  # shared with ``default`` otherwise
    assert type(db).__module__ == "config.postgresql.base"
    return db


@pytest.fixture
def wrapper():
    """A second wrapper of ``default`` (its own connection), closed at the end."""
    db = _new_wrapper()
    yield db
    db.close()


@pytest.fixture
def other_wrapper():
    """A third one, as another thread of the same process holds."""
    db = _new_wrapper()
    yield db
    db.close()


def _request(db, sql: str = "SELECT 42"):
    """What one request does with the connection: Django's start and end hooks around a
    query."""
    db.close_if_unusable_or_obsolete()  # request_started
    try:
        with db.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone()[0]
    finally:
        db.close_if_unusable_or_obsolete()  # request_finished


def _kill_session(db) -> int:
    pid = db.connection.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    return pid


def _server_sessions_of(pid: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone()[0]


def test_a_connection_idle_longer_than_the_delay_is_checked_and_replaced(wrapper):
    wrapper.settings_dict["HEALTH_CHECK_DELAY"] = 1.0
    assert _request(wrapper) == 42
    pid = _kill_session(wrapper)
    wrapper._last_good_at = time.monotonic() - 2.0  # idle for 2 s

    assert _request(wrapper) == 42  # the check found it dead: a new session answers
    assert wrapper.connection.info.backend_pid != pid
    assert _server_sessions_of(pid) == 0


def test_a_connection_used_within_the_delay_is_reused_without_a_check(wrapper):
    wrapper.settings_dict["HEALTH_CHECK_DELAY"] = 60.0
    assert _request(wrapper) == 42
    pid = _kill_session(wrapper)

    # No SELECT 1 went first: the query itself meets the dead session, once.
    with pytest.raises(OperationalError):
        _request(wrapper)
    assert wrapper.connection is None  # closed at the end of the failed request
    assert _request(wrapper) == 42
    assert wrapper.connection.info.backend_pid != pid


def test_a_failure_on_one_connection_gets_every_other_checked_before_reuse(wrapper, other_wrapper):
    # Two threads' connections, both used a moment ago; the server loses both sessions
    # (a restart, a failover). The first thread meets it: the second must not as well.
    for db in (wrapper, other_wrapper):
        db.settings_dict["HEALTH_CHECK_DELAY"] = 60.0
        assert _request(db) == 42
    pids = [_kill_session(db) for db in (wrapper, other_wrapper)]

    with pytest.raises(OperationalError):
        _request(wrapper)

    assert _request(other_wrapper) == 42  # checked, found dead, replaced
    assert other_wrapper.connection.info.backend_pid not in pids
    assert _request(wrapper) == 42


def test_a_delay_of_zero_checks_every_reuse_as_django_does(wrapper):
    wrapper.settings_dict["HEALTH_CHECK_DELAY"] = 0
    assert _request(wrapper) == 42
    _kill_session(wrapper)
    assert _request(wrapper) == 42


def test_the_settings_use_this_backend_with_a_one_second_delay():
    assert connection.settings_dict["ENGINE"] == "config.postgresql"
    assert connection.settings_dict["HEALTH_CHECK_DELAY"] == 1.0
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is True
