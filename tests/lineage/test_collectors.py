"""The PostgreSQL lineage collector against a real server with pg_stat_statements.

A throwaway cluster is started for the session (``initdb`` and ``pg_ctl``, run as the
``postgres`` user when the tests run as root, since ``initdb`` refuses root) on a free
port with the extension preloaded. Without the binaries the tests are skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import psycopg
import pytest

from catalog import selectors
from catalog.actors import Actor
from catalog.models import Claim, DatasetUsage, Job, UnclaimedUsage
from catalog.services.ownership import claim_create
from lineage.collectors import CollectorConfigError, build
from lineage.errors import CollectorUnknown
from lineage.models import CollectorCursor
from lineage.services import collecting
from tests.catalog.factories import DatasetFactory, TeamFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 28, 7, 0, tzinfo=UTC)
NAMESPACE = "postgres://warehouse.example:5432"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True)
    return str(candidates[0]) if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def pg_stats_server():
    """A PostgreSQL cluster of its own with pg_stat_statements: database ``shop`` with
    ``public.orders`` and ``public.customers``, and login roles ``reporting`` and
    ``adhoc`` that may read them. Yields a function connecting as a role to ``shop``,
    with ``.port`` and ``.dsn`` (the collector's, as superuser)."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip(
            "initdb/pg_ctl not installed: cannot start a PostgreSQL with pg_stat_statements"
        )
    as_postgres: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="tm-pgss-"))
    if os.geteuid() == 0:  # initdb refuses to run as root
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot run initdb as postgres")
        try:
            shutil.chown(base, user="postgres", group="postgres")
        except LookupError:
            pytest.skip("running as root and there is no postgres user to run initdb as")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    data, port = base / "data", _free_port()
    run = lambda *args: subprocess.run([*as_postgres, *args], check=True, capture_output=True)  # noqa: E731
    try:
        run(initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
        options = (
            f"-p {port} -c listen_addresses=127.0.0.1 -k {base} -c fsync=off "
            "-c shared_preload_libraries=pg_stat_statements"
        )
        run(pg_ctl, "-D", str(data), "-l", str(base / "log"), "-o", options, "-w", "start")
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"could not start PostgreSQL with pg_stat_statements: {exc.stderr!r}")
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("CREATE DATABASE shop")
            conn.execute("CREATE ROLE reporting LOGIN")
            conn.execute("CREATE ROLE adhoc LOGIN")
        shop = f"host=127.0.0.1 port={port} user=postgres dbname=shop"
        with psycopg.connect(shop, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int, total numeric)")
            conn.execute("CREATE TABLE customers (id int, name text)")
            conn.execute("GRANT SELECT ON orders, customers TO reporting, adhoc")

        @contextlib.contextmanager
        def connect(role: str):
            with psycopg.connect(
                f"host=127.0.0.1 port={port} user={role} dbname=shop", autocommit=True
            ) as conn:
                yield conn

        connect.port, connect.dsn = port, dsn
        yield connect
    finally:
        subprocess.run(
            [*as_postgres, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def warehouse(pg_stats_server, settings):
    """The collector ``warehouse`` configured on the throwaway server, its statistics
    reset; teams ``sales`` (owns shop.public.orders, registered) and ``analytics``
    (claims the role ``reporting``)."""
    settings.TIDEMARK_LINEAGE_COLLECTORS = {
        "warehouse": {"kind": "postgres", "dsn": pg_stats_server.dsn, "namespace": NAMESPACE}
    }
    with psycopg.connect(pg_stats_server.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    sales, analytics = TeamFactory(slug="sales"), TeamFactory(slug="analytics")
    DatasetFactory(namespace=NAMESPACE, name="shop.public.orders", owner=sales)
    Claim.objects.create(team=analytics, kind=Claim.Kind.DB_ROLE, pattern=f"{NAMESPACE}/reporting")
    return analytics


def _select(server, role: str, sql: str, times: int = 1) -> None:
    with server(role) as conn:
        for _ in range(times):
            conn.execute(sql).fetchall()


def test_collector_run_a_role_reading_without_a_subscription_is_an_undeclared_read_of_its_team(
    pg_stats_server, warehouse, client_for
):
    _select(pg_stats_server, "reporting", "SELECT id, total FROM orders WHERE id > 1", times=2)
    _select(pg_stats_server, "adhoc", "SELECT * FROM public.customers")

    summary = collecting.collector_run(name="warehouse", now=NOW)

    assert summary.unclaimed_principals == ["adhoc"]
    (usage,) = selectors.undeclared_reads_list(team=warehouse)
    assert (usage.job.namespace, usage.job.name, usage.job.team) == (
        NAMESPACE,
        "reporting",
        warehouse,
    )
    assert (usage.dataset.name, usage.verified, usage.run_count) == ("shop.public.orders", True, 2)
    assert Job.objects.get(name="adhoc").team is None  # seen, owned by no team
    assert not DatasetUsage.objects.filter(job__name="adhoc").exists()

    report = client_for(warehouse, scopes=["read"]).get("/api/v1/reports/undeclared-reads")
    assert report.status_code == 200, report.json()
    (row,) = report.json()["results"]
    assert row["team"] == "analytics"


def test_collector_run_keeps_an_unclaimed_roles_reads_for_the_team_that_claims_it_later(
    pg_stats_server, warehouse
):
    _select(pg_stats_server, "adhoc", "SELECT id, total FROM orders", times=3)
    summary = collecting.collector_run(name="warehouse", now=NOW)
    assert summary.unclaimed_principals == ["adhoc"]
    assert not DatasetUsage.objects.filter(job__name="adhoc").exists()
    held = UnclaimedUsage.objects.get()
    assert (held.pattern, held.dataset_name, held.direction, held.access_count) == (
        f"{NAMESPACE}/adhoc",
        "shop.public.orders",
        "read",
        3,
    )

    finance = TeamFactory(slug="finance")
    claim_create(
        actor=Actor(team=finance, username="lead"), kind="db_role", pattern=f"{NAMESPACE}/adhoc"
    )
    (usage,) = selectors.undeclared_reads_list(team=finance)
    assert (usage.job.name, usage.job.team, usage.verified, usage.run_count) == (
        "adhoc",
        finance,
        True,
        3,
    )
    assert (usage.first_seen_at, usage.last_seen_at) == (NOW, NOW)
    assert not UnclaimedUsage.objects.exists()

    # Nothing ran since: the next run adds nothing, and nothing is held twice.
    collecting.collector_run(name="warehouse", now=NOW + timedelta(hours=1))
    assert DatasetUsage.objects.get(team=finance).run_count == 3


def test_collector_run_attributes_what_was_held_while_a_claim_was_being_made(
    pg_stats_server, warehouse
):
    _select(pg_stats_server, "adhoc", "SELECT id FROM orders", times=2)
    collecting.collector_run(name="warehouse", now=NOW)
    finance = TeamFactory(slug="finance")
    # As if the claim committed while that run was still recording: it saw nothing held.
    Claim.objects.create(team=finance, kind=Claim.Kind.DB_ROLE, pattern=f"{NAMESPACE}/adhoc")
    _select(pg_stats_server, "adhoc", "SELECT id FROM orders")
    collecting.collector_run(name="warehouse", now=NOW + timedelta(hours=1))
    assert DatasetUsage.objects.get(team=finance).run_count == 3
    assert not UnclaimedUsage.objects.exists()


def test_collector_run_twice_records_only_new_calls(pg_stats_server, warehouse):
    _select(pg_stats_server, "reporting", "SELECT count(*) FROM orders")
    collecting.collector_run(name="warehouse", now=NOW)
    collecting.collector_run(name="warehouse", now=NOW + timedelta(minutes=5))
    usage = DatasetUsage.objects.get(job__name="reporting", dataset_name="shop.public.orders")
    assert usage.run_count == 1

    _select(pg_stats_server, "reporting", "SELECT count(*) FROM orders", times=3)
    collecting.collector_run(name="warehouse", now=NOW + timedelta(minutes=10))
    usage.refresh_from_db()
    assert (usage.run_count, usage.last_seen_at) == (4, NOW + timedelta(minutes=10))
    assert CollectorCursor.objects.get(name="warehouse").runs == 3


def test_collector_run_after_a_reset_counts_from_a_new_baseline(pg_stats_server, warehouse):
    _select(pg_stats_server, "reporting", "SELECT count(*) FROM orders", times=5)
    collecting.collector_run(name="warehouse", now=NOW)
    with psycopg.connect(pg_stats_server.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    _select(pg_stats_server, "reporting", "SELECT count(*) FROM orders", times=2)
    collecting.collector_run(name="warehouse", now=NOW + timedelta(minutes=5))
    usage = DatasetUsage.objects.get(job__name="reporting", dataset_name="shop.public.orders")
    assert usage.run_count == 7


def test_collector_run_bounded_runs_cover_everything_once(pg_stats_server, warehouse, settings):
    settings.TIDEMARK_LINEAGE_COLLECTORS["warehouse"]["max_statements"] = 2
    for statement in (
        "SELECT id FROM orders",
        "SELECT total FROM orders",
        "SELECT id, total FROM orders",
    ):
        _select(pg_stats_server, "reporting", statement)
    for minute in range(40):
        summary = collecting.collector_run(name="warehouse", now=NOW + timedelta(minutes=minute))
        assert summary.stats["statements"] <= 2
        if not summary.more:
            break
    else:
        pytest.fail("the bounded runs never reached the end")
    usage = DatasetUsage.objects.get(job__name="reporting", dataset_name="shop.public.orders")
    assert usage.run_count == 3


def test_collector_run_of_an_unknown_collector_is_an_error(settings):
    settings.TIDEMARK_LINEAGE_COLLECTORS = {}
    with pytest.raises(CollectorUnknown):
        collecting.collector_run(name="nowhere", now=NOW)


@pytest.mark.parametrize(
    "config",
    [
        {"kind": "oracle", "dsn": "x", "namespace": NAMESPACE},
        {"kind": "postgres", "namespace": NAMESPACE},
        {"kind": "postgres", "dsn": "x", "namespace": "s3://bucket"},
        {"kind": "postgres", "dsn": "x", "namespace": NAMESPACE, "max_statements": 0},
    ],
)
def test_build_rejects_a_malformed_collector_entry(config):
    with pytest.raises(CollectorConfigError):
        build("bad", config)


def test_collect_lineage_task_and_command_run_every_configured_collector(
    pg_stats_server, warehouse
):
    from django.core.management import call_command

    from lineage.tasks import collect_lineage

    _select(pg_stats_server, "reporting", "SELECT count(*) FROM orders")
    assert collect_lineage().startswith("warehouse: ")
    out = StringIO()
    call_command("collect_lineage", "--collector", "warehouse", stdout=out)
    assert "lineage collector warehouse:" in out.getvalue()
    usage = DatasetUsage.objects.get(job__name="reporting", dataset_name="shop.public.orders")
    assert usage.run_count == 1
