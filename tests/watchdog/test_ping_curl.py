"""Lines from Healthchecks' own documentation, run with the real ``curl`` against the
watchdog's web server (gunicorn, ``config.settings.watchdog``), with only the host changed:
a cron line, logs attached and exit statuses, ``/log``, run ids, slug URLs with
``?create=1``, CORS, ``Ping-Body-Limit``, and a 429 whose ``Retry-After`` curl's
``--retry`` waits for.

The documentation's ``uuidgen`` is replaced by the kernel's UUID source (same format), as
the test machine has no ``uuidgen``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from watchdog import monitors, ping_keys
from watchdog.models import Monitor, Ping

pytestmark = [
    pytest.mark.django_db(transaction=True, databases="__all__"),
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    """The watchdog's web server alone, on the suite's test watchdog database."""
    from tests.catalog.stack_helpers import watchdog_environment
    from tests.catalog.worker_helpers import free_port
    from tests.watchdog.processes import WatchdogServer

    tmp = tmp_path_factory.mktemp("curl")
    with django_db_blocker.unblock():
        env = watchdog_environment(TIDEMARK_VAR_DIR=str(tmp / "var"))
    process = WatchdogServer(
        name="watchdog-web", log_path=tmp / "web.log", env=env, port=free_port()
    )
    process.start()
    try:
        process.wait_ready()
        yield process
    finally:
        process.kill()


def sh(script: str, **env: str) -> subprocess.CompletedProcess:
    """Run a documented shell snippet with ``sh``, the variables given in its environment."""
    return subprocess.run(
        ["sh", "-c", script],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def monitor():
    return monitors.monitor_create(now=timezone.now(), name="backup", period_seconds=3600)


def _url(server, monitor) -> str:
    return f"{server.url}/ping/{monitor.ping_key}"


def test_the_cron_line(server, monitor):
    done = sh(
        "/bin/true && curl -fsS -m 10 --retry 5 -o /dev/null $PING_URL",
        PING_URL=_url(server, monitor),
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.UP
    assert list(monitor.pings.values_list("kind", "method")) == [("success", "GET")]


def test_logs_attached_and_the_exit_status(server, monitor):
    url = _url(server, monitor)
    ok = sh(
        'm=$(echo "renewed 2 certificates" 2>&1)\n'
        'curl -fsS -m 10 --retry 5 --data-raw "$m" $PING_URL',
        PING_URL=url,
    )
    assert (ok.returncode, ok.stdout) == (0, "OK")
    failed = sh(
        'm=$(sh -c "echo cannot reach acme; exit 3" 2>&1)\n'
        'curl -fsS -m 10 --retry 5 --data-raw "$m" $PING_URL/$?',
        PING_URL=url,
    )
    assert (failed.returncode, failed.stdout) == (0, "OK")
    pings = list(monitor.pings.order_by("id").values_list("kind", "exit_status", "body"))
    assert pings == [
        ("success", None, "renewed 2 certificates"),
        ("fail", 3, "cannot reach acme"),
    ]
    monitor.refresh_from_db()
    assert monitor.state == Monitor.State.DOWN


def test_a_log_event(server, monitor):
    done = sh(
        'm="step 2 of 5: 1200 rows"\ncurl -fsS -m 10 --retry 5 --data-raw "$m" $PING_URL/log',
        PING_URL=_url(server, monitor),
    )
    assert (done.returncode, done.stdout) == (0, "OK")
    assert list(monitor.pings.values_list("kind", "body")) == [("log", "step 2 of 5: 1200 rows")]
    monitor.refresh_from_db()
    assert (monitor.state, monitor.last_ping_at) == (Monitor.State.NEW, None)


def test_the_run_time_with_a_run_id(server, monitor):
    script = """
RID=`cat /proc/sys/kernel/random/uuid`

# send a start ping, specify rid parameter:
curl -fsS -m 10 --retry 5 $PING_URL/start?rid=$RID

sleep 1

# send the success ping, use the same rid parameter:
curl -fsS -m 10 --retry 5 $PING_URL?rid=$RID
"""
    done = sh(script, PING_URL=_url(server, monitor))
    assert (done.returncode, done.stdout) == (0, "OKOK")
    start, finish = monitor.pings.order_by("id")
    assert start.run_id == finish.run_id and len(start.run_id) == 36
    assert finish.duration_ms >= 1000


def test_auto_provisioning_by_slug(server):
    _, key = ping_keys.ping_key_create(owner="infra", now=timezone.now())
    line = "curl -m 10 --retry 5 $PING_ENDPOINT$KEY/srv01?create=1"
    env = {"PING_ENDPOINT": f"{server.url}/ping/", "KEY": key}
    created, again = sh(line, **env), sh(line, **env)
    assert (created.returncode, created.stdout) == (0, "Created")
    assert (again.returncode, again.stdout) == (0, "OK")
    monitor = Monitor.objects.get(slug="srv01")
    assert (monitor.owner, monitor.pings.count()) == ("infra", 2)
    done = sh("curl -fsS -m 10 --retry 5 $PING_ENDPOINT$KEY/srv01/fail", **env)
    assert done.returncode == 0
    unknown = sh("curl -fsS -m 10 -o /dev/null $PING_ENDPOINT$KEY/srv02", **env)
    assert unknown.returncode == 22  # -f: a 404 fails the line, as it should


def test_headers_for_browsers_and_the_body_limit(server, monitor):
    url = _url(server, monitor)
    got = sh("curl -fsS -D - -o /dev/null $PING_URL", PING_URL=url)
    headers = got.stdout.lower()
    assert "access-control-allow-origin: *" in headers
    assert "ping-body-limit: 10000" in headers
    preflight = sh(
        "curl -sS -D - -o /dev/null -X OPTIONS -H 'Origin: https://status.example.com' "
        "-H 'Access-Control-Request-Method: POST' "
        "-H 'Access-Control-Request-Headers: content-type' "
        "$PING_URL",
        PING_URL=url,
    )
    lines = preflight.stdout.lower()
    assert lines.startswith("http/1.1 204")
    assert "access-control-allow-origin: *" in lines
    assert "access-control-allow-methods: get, head, post" in lines
    assert "access-control-allow-headers: content-type" in lines
    assert monitor.pings.count() == 1  # the preflight is not a ping


def test_a_run_id_that_is_not_a_uuid(server, monitor):
    script = "curl -sS -w ' %{http_code}' \"$PING_URL/start?rid=1234\""
    done = sh(script, PING_URL=_url(server, monitor))
    assert done.stdout == "invalid uuid format 400"
    assert not monitor.pings.exists()


def test_curl_retry_waits_for_retry_after(server, monitor):
    """Over the rate, the answer is 429 with ``Retry-After``; the documented line's
    ``--retry 5`` waits that long and then gets its ping in."""
    from django.conf import settings

    url = _url(server, monitor)
    limit = settings.WATCHDOG_PING_RATE_PER_MINUTE  # the server's default too
    started = timezone.now() - timedelta(seconds=58)
    Monitor.objects.filter(pk=monitor.pk).update(rate_window_start=started, rate_count=limit)
    refused = sh("curl -sS -D - -o /dev/null $PING_URL", PING_URL=url)
    assert refused.stdout.startswith("HTTP/1.1 429")
    retry_after = next(
        int(line.split(":")[1])
        for line in refused.stdout.splitlines()
        if line.lower().startswith("retry-after:")
    )
    assert 1 <= retry_after <= 2
    assert not Ping.objects.exists()

    began = time.monotonic()
    done = sh("curl -fsS -m 10 --retry 5 -o /dev/null $PING_URL", PING_URL=url)
    waited = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert waited >= 0.9, f"curl retried after {waited:.2f} s"
    assert monitor.pings.count() == 1
