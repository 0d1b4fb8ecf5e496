"""``tidemark publish``, ``wait``, ``datasets`` and ``apply`` end to end against a live
catalog, with their exit statuses."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from django.utils import timezone
from tidemark_client import Client, ProblemError
from tidemark_client.cli import EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE

from catalog.actors import Actor
from catalog.models import Dataset, IdempotencyRecord, Partition
from catalog.services import datasets, publishing

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.urls("tests.urls_catalog_and_watchdog"),
]

DAY = "2026-11-28"


@pytest.fixture
def orders(tidemark) -> Dataset:
    return datasets.dataset_register(
        actor=Actor(team=tidemark.team),
        namespace="s3://lake",
        name="raw/orders",
        partitioning="daily",
        criticality="high",
    )


def _revision(dataset: Dataset, key: str):
    return Partition.objects.select_related("current_revision").get(dataset=dataset, key=key)


def test_publish_records_a_ready_partition_with_an_idempotency_key(tidemark, orders):
    done = tidemark.cli("publish", "s3://lake/raw/orders", DAY, "--version", "v1")

    assert (done.returncode, done.stderr) == (EXIT_OK, "")
    assert done.stdout == f"s3://lake/raw/orders {DAY}: ready version v1 (recorded)\n"
    revision = _revision(orders, DAY).current_revision
    assert (revision.state, revision.version) == ("ready", "v1")
    [record] = IdempotencyRecord.objects.all()  # sent by default
    assert record.status_code == 201 and len(record.key) == 36


def test_publish_with_a_given_key_twice_is_replayed(tidemark, orders):
    args = ("publish", str(orders.pk), DAY, "--state", "failed", "--idempotency-key", "run-42")
    first, again = tidemark.cli(*args), tidemark.cli(*args, "--json")

    assert first.returncode == again.returncode == EXIT_OK, first.stderr + again.stderr
    assert first.stdout == f"s3://lake/raw/orders {DAY}: failed (recorded)\n"
    assert json.loads(again.stdout)["state"] == "failed"
    assert IdempotencyRecord.objects.get().key == "run-42"
    assert _revision(orders, DAY).current_revision.state == "failed"


def test_publish_without_a_key_sends_none(tidemark, orders):
    done = tidemark.cli("publish", "s3://lake/raw/orders", DAY, "--no-idempotency-key")

    assert done.returncode == EXIT_OK, done.stderr
    assert not IdempotencyRecord.objects.exists()


def test_a_refused_publish_prints_the_problem_and_exits_1(tidemark, orders):
    unknown = tidemark.cli("publish", "s3://lake/raw/order", DAY)
    malformed = tidemark.cli("publish", "s3://lake/raw/orders", "28.11.2026")

    assert unknown.returncode == EXIT_ERROR
    assert unknown.stderr.startswith("tidemark: 404 dataset_not_found: ")
    assert "did you mean s3://lake/raw/orders?" in unknown.stderr
    assert malformed.returncode == EXIT_ERROR
    assert "tidemark: 400 " in malformed.stderr
    assert "  partition: " in malformed.stderr
    assert unknown.stdout == malformed.stdout == ""


def test_a_bad_key_and_no_url_exit_1(tidemark, orders):
    bad_key = tidemark.cli("datasets", TIDEMARK_API_KEY="tm_not_a_key")
    no_url = tidemark.cli("datasets", TIDEMARK_URL="")

    assert bad_key.returncode == EXIT_ERROR
    assert bad_key.stderr.startswith("tidemark: 401 ")
    assert no_url.returncode == EXIT_ERROR
    assert "TIDEMARK_URL" in no_url.stderr


def test_wait_blocks_until_the_partition_is_ready(tidemark, orders):
    waiting = subprocess.Popen(
        [
            *(sys.executable, "-m", "tidemark_client", "wait", "s3://lake/raw/orders", DAY),
            *("--timeout", "60", "--interval", "0.2"),
            *("--url", tidemark.url, "--api-key", tidemark.key),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # It polls (a progress line per poll) while the partition is missing, then pending.
        assert "raw/orders 2026-11-28: missing" in waiting.stderr.readline()
        publishing.readiness_publish(
            actor=Actor(team=tidemark.team),
            namespace="s3://lake",
            name="raw/orders",
            partition=DAY,
            version="v7",
            now=timezone.now(),
        )
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == EXIT_OK, err
    assert out == f"{DAY}: ready version v7\n"


def test_wait_exits_3_for_a_failed_partition(tidemark, orders):
    publishing.readiness_publish(
        actor=Actor(team=tidemark.team),
        namespace="s3://lake",
        name="raw/orders",
        partition=DAY,
        state="failed",
        now=timezone.now(),
    )

    done = tidemark.cli("wait", "s3://lake/raw/orders", DAY, "--json", "--quiet")

    assert done.returncode == EXIT_FAILED
    assert json.loads(done.stdout)["state"] == "failed"
    assert done.stderr == f"tidemark: s3://lake/raw/orders {DAY} is failed\n"


def test_wait_exits_4_at_the_timeout(tidemark, orders):
    started = time.monotonic()
    done = tidemark.cli("wait", "s3://lake/raw/orders", DAY, "--timeout", "1", "--interval", "0.3")

    assert done.returncode == EXIT_TIMEOUT
    assert 1 <= time.monotonic() - started < 20
    assert "not ready after 1 s (last state: missing)" in done.stderr
    assert done.stderr.count(": missing\n") >= 3  # it polled, and once more at the timeout


def test_wait_for_an_unknown_dataset_exits_1_at_once(tidemark, orders):
    done = tidemark.cli("wait", "s3://lake/raw/nothing", DAY, "--timeout", "60")

    assert done.returncode == EXIT_ERROR
    assert done.stderr.startswith("tidemark: 404 dataset_not_found")


def test_usage_errors_exit_2(tidemark):
    assert tidemark.cli("wait", "s3://lake/raw/orders").returncode == EXIT_USAGE
    assert tidemark.cli("publish", "x", DAY, "--state", "late").returncode == EXIT_USAGE
    assert tidemark.cli("run", "--ping-url", "http://127.0.0.1:9/x").returncode == EXIT_USAGE


def test_datasets_lists_a_table_or_json(tidemark, orders):
    datasets.dataset_register(
        actor=Actor(team=tidemark.team), namespace="postgres://db:5432", name="shop.public.refunds"
    )

    table = tidemark.cli("datasets")
    as_json = tidemark.cli("datasets", "--json", "--namespace", "s3://lake")

    assert table.returncode == as_json.returncode == EXIT_OK
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["id", "dataset", "owner", "criticality", "partitioning", "lifecycle"]
    assert [row.split()[1:] for row in rows] == [  # in the order of registration
        ["s3://lake/raw/orders", "orders", "high", "daily", "active"],
        ["postgres://db:5432/shop.public.refunds", "orders", "medium", "daily", "active"],
    ]
    assert [(d["id"], d["name"]) for d in json.loads(as_json.stdout)] == [(orders.pk, "raw/orders")]


DECLARATION = """\
team: orders
datasets:
  - namespace: s3://lake
    name: raw/orders
    criticality: critical
  - namespace: s3://lake
    name: raw/refunds
    sla_cron: "0 6 * * *"
"""


def test_apply_shows_the_plan_then_applies_it(tidemark, orders, tmp_path):
    file = tmp_path / "catalog.yaml"
    file.write_text(DECLARATION)

    plan = tidemark.cli("apply", str(file), "--dry-run")
    assert plan.returncode == EXIT_OK, plan.stderr
    assert plan.stdout.splitlines() == [
        "~ s3://lake/raw/orders (update)",
        "    criticality: 'high' -> 'critical'",
        "+ s3://lake/raw/refunds (create)",
        "    sla_cron: '0 6 * * *'",
        "dry run: nothing changed; run again without --dry-run to apply",
    ]
    assert Dataset.objects.count() == 1

    applied = tidemark.cli("apply", str(file))
    again = tidemark.cli("apply", str(file), "--json")

    assert applied.returncode == EXIT_OK and applied.stdout.endswith("\napplied\n")
    assert Dataset.objects.get(name="raw/refunds").sla_cron == "0 6 * * *"
    orders.refresh_from_db()
    assert orders.criticality == "critical"
    assert json.loads(again.stdout)["changed"] is False


def test_apply_of_a_bad_file_names_the_field(tidemark, orders, tmp_path):
    file = tmp_path / "catalog.yaml"
    file.write_text(DECLARATION.replace("0 6 * * *", "0 25 * * *"))

    done = tidemark.cli("apply", str(file))

    assert done.returncode == EXIT_ERROR
    assert "  datasets[1].sla_cron: " in done.stderr
    assert not Dataset.objects.filter(name="raw/refunds").exists()


def test_the_client_gives_each_refused_field_with_the_value_sent(tidemark, orders):
    with Client(tidemark.url, tidemark.key) as client, pytest.raises(ProblemError) as raised:
        client.publish("s3://lake", "raw/orders", DAY, manifest={"expected_files": -1})

    assert raised.value.status == 400
    assert [(e.field, e.value) for e in raised.value.errors] == [("manifest.expected_files", -1)]
