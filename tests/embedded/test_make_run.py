"""``make run`` (``bin/run``) starts web, workers and beat embedded, serves the demo catalog,
rings the worker after a publish, stops on Ctrl-C and keeps its demo key across starts."""

from __future__ import annotations

import re
import signal
import sqlite3
from contextlib import closing
from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .helpers import wait_until

DEMO = {"namespace": "s3://tidemark-demo", "name": "raw/orders"}


def _query(stack, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(stack.var_dir / "catalog.sqlite3", timeout=20)) as db:
        return db.execute(sql).fetchall()


def _doorbell_answered(stack, deliveries_sql: str) -> bool:
    """The worker delivered the publish's notification, and ran deliver_due more often than
    beat's sweep scheduled it: at least one run came from the publish's doorbell."""
    out = stack.stdout
    received = len(re.findall(r"Task catalog\.tasks\.deliver_due\[[^\]]+\] received", out))
    swept = out.count("Sending due task sweep-deliveries")
    delivered = [state for state, _ in _query(stack, deliveries_sql)] == ["succeeded"]
    return delivered and received > swept


def _metrics(url: str) -> dict[tuple[str, tuple], float]:
    """A /metrics answer's samples: (name, sorted label pairs) -> value."""
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _sign_in_on_call(stack) -> str:
    """Sign in to the watchdog's on-call pages with the login the banner printed; the
    monitors page's HTML."""
    match = re.search(r"On-call: +(\S+)/oncall/ +as (\S+) / password (\S+)", stack.stdout)
    assert match, stack.stdout
    url, username, password = match.groups()
    assert url == stack.watchdog_url
    with httpx.Client(base_url=url, timeout=10) as client:
        form = client.get("/oncall/login")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        signed_in = client.post(
            "/oncall/login",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            follow_redirects=True,
        )
    assert signed_in.status_code == 200, signed_in.text
    return signed_in.text


def test_make_run_publish_writes_outbox_rings_worker_and_ctrl_c_stops_all(start_stack, tmp_path):
    stack = start_stack(tmp_path / "var")
    assert (tmp_path / "var" / "demo-api-key").read_text().strip() == stack.key
    # The demo's on-call operator signs in and sees the demo's critical dataset.
    monitors = _sign_in_on_call(stack)
    assert "finance.public.daily_revenue data" in monitors and "Sign in" not in monitors
    names = [n for n in stack.commands.values() if "sh -c" not in n]  # not honcho's shells
    # The Procfile's web process: gunicorn's master and its 4 sync workers.
    assert sum("bin/gunicorn config.wsgi:application" in n for n in names) == 5, names
    assert sum("config.wsgi_watchdog:application" in n for n in names) == 2, names
    assert any("manage.py run_watchdog" in n for n in names), names
    assert httpx.get(f"{stack.watchdog_url}/healthz", timeout=5).text == "ok"
    # The Procfile's two Celery workers: the work queues', and the heartbeat's own.
    celery_workers = [n for n in names if "celery -A config.celery worker" in n]
    assert len(celery_workers) == 2, names
    assert sum("-Q housekeeping " in n for n in celery_workers) == 1, names
    assert any("celery -A config.celery beat" in n for n in names), names

    # Today's partition: the demo's history holds every partition up to yesterday's.
    today = datetime.now(UTC).date().isoformat()
    response = httpx.post(
        f"{stack.url}/api/v1/readiness",
        headers={"Authorization": f"Bearer {stack.key}"},
        json={**DEMO, "partition": today},
        timeout=10,
    )

    assert response.status_code == 201, response.text
    assert response.json()["state"] == "ready"
    # The publish's deliveries to webhooks: the demo's (analytics reads raw/orders).
    event_id = int(response.json()["event_id"])
    deliveries_sql = (
        "SELECT d.state, e.url FROM catalog_delivery d "  # noqa: S608 - an int, no input
        "JOIN catalog_endpoint e ON e.id = d.endpoint_id "
        "JOIN catalog_notification n ON n.id = d.notification_id WHERE e.kind = 'webhook' "
        f"AND n.dedup_key = 'readiness-event:{event_id}'"
    )
    [(_, url)] = _query(stack, deliveries_sql)
    assert url == f"{stack.url}/demo/hooks/analytics"
    wait_until(
        lambda: _doorbell_answered(stack, deliveries_sql),
        20,
        "the worker to deliver the notification, woken by the publish's doorbell",
        stack.describe,
    )
    assert _query(stack, deliveries_sql) == [("succeeded", url)]
    assert (
        f"demo receiver analytics: verified partition.ready for raw/orders partition {today}"
        in stack.stdout
    )
    # Metrics: the web's /metrics sums every catalog process's counters (the Celery worker
    # made the delivery), the watchdog's its loop's.
    catalog = _metrics(f"{stack.url}/metrics")
    assert catalog[("tidemark_publishes_total", (("result", "recorded"),))] >= 1
    delivered = (("kind", "webhook"), ("outcome", "succeeded"))
    assert catalog[("tidemark_deliveries_total", delivered)] >= 1
    watchdog = _metrics(f"{stack.watchdog_url}/metrics")
    assert watchdog[("tidemark_watchdog_cycle_duration_seconds_count", ())] >= 1

    took = stack.stop(signal.SIGINT)

    assert took < 20
    assert "SIGINT received" in stack.stdout
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{stack.url}/healthz", timeout=2)


def test_make_run_restart_reuses_demo_key_and_catalog(start_stack, tmp_path):
    var_dir = tmp_path / "var"
    first = start_stack(var_dir)
    counts_sql = (
        "SELECT (SELECT count(*) FROM catalog_team), (SELECT count(*) FROM catalog_dataset), "
        "(SELECT count(*) FROM catalog_subscription), (SELECT count(*) FROM catalog_apikey)"
    )
    first_counts = _query(first, counts_sql)
    # The demo's three teams, eight datasets, four declarations, and a key per team's
    # pipelines beside the demo key.
    assert first_counts == [(3, 8, 4, 4)]
    first.stop(signal.SIGTERM)

    second = start_stack(var_dir)

    assert re.fullmatch(r"tm_[A-Za-z0-9_-]+", second.key)
    assert second.key == first.key
    assert _query(second, counts_sql) == first_counts
    response = httpx.get(
        f"{second.url}/api/v1/me", headers={"Authorization": f"Bearer {second.key}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    assert response.json()["team"]["slug"] == "orders"
