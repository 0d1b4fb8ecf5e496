"""``tidemark run -- COMMAND`` wraps a job in the watchdog's pings against a live server:
``/start``, then ``/<exit status>`` with the tail of the output (at most the
``Ping-Body-Limit`` the watchdog announced) and the same run id; it exits with the
command's status, and a watchdog that cannot be reached does not stop the job."""

from __future__ import annotations

import pytest
from django.utils import timezone
from tidemark_client.cli import EXIT_USAGE

from watchdog import monitors
from watchdog.models import Monitor

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.urls("tests.urls_catalog_and_watchdog"),
]


@pytest.fixture
def monitor():
    return monitors.monitor_create(now=timezone.now(), name="nightly", period_seconds=3600)


def _pings(monitor: Monitor) -> list[tuple]:
    return list(monitor.pings.order_by("id").values_list("kind", "exit_status", "body", "run_id"))


def test_a_job_that_succeeds_sends_start_and_success(tidemark, monitor):
    url = f"{tidemark.url}/ping/{monitor.ping_key}"

    done = tidemark.cli("run", "--ping-url", url, "--", "sh", "-c", "echo rows: 1200")

    assert (done.returncode, done.stdout, done.stderr) == (0, "rows: 1200\n", "")
    (start, _, start_body, rid), (kind, status, body, end_rid) = _pings(monitor)
    assert (start, start_body) == ("start", "")
    assert (kind, status, body) == ("success", 0, "rows: 1200\n")
    assert rid == end_rid and len(rid) == 36
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.UP


def test_a_job_that_fails_sends_its_exit_status_and_output(tidemark, monitor):
    script = "echo step 1; echo cannot reach s3 >&2; exit 3"

    done = tidemark.cli(
        "run", "--", "sh", "-c", script, TIDEMARK_PING_URL=f"{tidemark.url}/ping/{monitor.ping_key}"
    )

    # Its output still reaches our stdout and stderr, each on its own stream.
    assert (done.returncode, done.stdout, done.stderr) == (3, "step 1\n", "cannot reach s3\n")
    _, (kind, status, body, _) = _pings(monitor)
    assert (kind, status) == ("fail", 3)
    assert "step 1\n" in body and "cannot reach s3\n" in body
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.DOWN


def test_the_body_is_the_tail_of_the_output_within_the_ping_body_limit(tidemark, monitor, settings):
    settings.WATCHDOG_PING_BODY_LIMIT = 100
    url = f"{tidemark.url}/ping/{monitor.ping_key}"
    script = "for i in $(seq 1 500); do echo line $i; done"

    done = tidemark.cli("run", "--ping-url", url, "--", "sh", "-c", script)

    assert done.returncode == 0 and done.stdout.count("\n") == 500
    _, (_, _, body, _) = _pings(monitor)
    expected = "".join(f"line {i}\n" for i in range(1, 501))[-100:]
    assert body == expected and body.endswith("line 500\n")


def test_a_command_that_is_not_found_exits_127_and_fails(tidemark, monitor):
    url = f"{tidemark.url}/ping/{monitor.ping_key}"

    done = tidemark.cli("run", "--ping-url", url, "--", "no-such-command-here")

    assert done.returncode == 127
    assert done.stderr == "tidemark run: command not found: no-such-command-here\n"
    _, (kind, status, body, _) = _pings(monitor)
    assert (kind, status) == ("fail", 127) and "command not found" in body


def test_a_slug_ping_url_with_create_provisions_the_monitor(tidemark):
    from watchdog import ping_keys

    _, key = ping_keys.ping_key_create(owner="infra", now=timezone.now())
    url = f"{tidemark.url}/ping/{key}/nightly-backup?create=1"

    done = tidemark.cli("run", "--ping-url", url, "--", "true")

    assert done.returncode == 0, done.stderr
    created = Monitor.objects.get(slug="nightly-backup")
    assert [kind for kind, *_ in _pings(created)] == ["start", "success"]


def test_the_job_runs_and_keeps_its_status_when_the_watchdog_is_unreachable(tidemark):
    url = "http://127.0.0.1:9/ping/5bf39bd2-4f5d-4a8b-8a7a-1bd2b6a0a0a0"

    done = tidemark.cli("run", "--ping-url", url, "--", "sh", "-c", "echo done; exit 5")

    assert (done.returncode, done.stdout) == (5, "done\n")
    assert "tidemark run: start ping failed: " in done.stderr
    assert "tidemark run: exit ping failed: " in done.stderr


def test_an_unknown_ping_url_is_reported_and_the_job_still_runs(tidemark):
    url = f"{tidemark.url}/ping/5bf39bd2-4f5d-4a8b-8a7a-1bd2b6a0a0a0"

    done = tidemark.cli("run", "--ping-url", url, "--", "true")

    assert done.returncode == 0
    assert "start ping failed: 404 http_404: not found" in done.stderr


def test_run_without_a_ping_url_is_a_usage_error(tidemark):
    done = tidemark.cli("run", "--", "true")

    assert done.returncode == EXIT_USAGE
    assert "TIDEMARK_PING_URL" in done.stderr
