"""The catalog page and a dataset page with 10,000 datasets and 1,000,000 partitions,
seeded once for the module with ``INSERT ... SELECT generate_series``: bounded queries,
an indexed latest-ready lookup, and the response time printed (``-s`` shows it)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from catalog.models import Dataset, Team

pytestmark = pytest.mark.django_db

DATASETS = 10_000
PARTITIONS_EACH = 100  # 1,000,000 partitions, each with one revision (as in SEED)

SEED = """
-- Foreign keys are not checked while seeding (replica role): every id below is known.
SET LOCAL session_replication_role = replica;
INSERT INTO catalog_team (slug, name, contact_email, contact_slack_webhook,
    paging_routing_key, created_at)
SELECT 'team-' || t, 'Team ' || t, '', '', '', now() FROM generate_series(0, 19) t;

INSERT INTO catalog_dataset (namespace, name, owner_id, description, criticality,
    partitioning, partition_timezone, completion_signal, success_marker, manifest_name,
    storage_source, location_template, sla_cron, sla_timezone, sla_grace_seconds,
    change_notice_days, accepts_future_partitions, lifecycle, badge_token, created_at,
    updated_at)
SELECT 's3://lake-' || (d % 7), 'raw/table_' || lpad(d::text, 5, '0'),
    (SELECT id FROM catalog_team WHERE slug = 'team-' || (d % 20)), 'table ' || d,
    (ARRAY['low', 'medium', 'high', 'critical'])[1 + d % 4], 'daily', 'UTC', 'event',
    '_SUCCESS', '_manifest.json', '', '', CASE WHEN d % 3 = 0 THEN '' ELSE '0 6 * * *' END,
    'UTC', 0, 14, false, 'active', left(md5(d::text) || md5('b' || d::text), 43),
    now() - interval '400 days', now()  -- registered before its history: every period tracked
FROM generate_series(1, 10000) d;

-- Revision n + offset belongs to partition n; the newest
-- partition of every fifth dataset is still pending, so "latest ready" walks past it.
CREATE TEMP TABLE seed_partition AS
SELECT row_number() OVER () + (SELECT coalesce(max(id), 0) FROM catalog_partition) AS id,
    ds.id AS dataset_id, p AS age
FROM catalog_dataset ds, generate_series(1, 100) p;

INSERT INTO catalog_partitionrevision (id, partition_id, version, state, metadata,
    code_version, detected_by, ready_at, created_at)
SELECT id + {revision_offset}, id, '',
    CASE WHEN age = 1 AND dataset_id % 5 = 0 THEN 'pending' ELSE 'ready' END, '{}', '',
    CASE WHEN age % 10 = 0 THEN 'poll' ELSE 'event' END,
    CASE WHEN age = 1 AND dataset_id % 5 = 0 THEN NULL
         ELSE date_trunc('day', now()) - (age - 1) * interval '1 day' + interval '5 hours' END,
    now()
FROM seed_partition;

INSERT INTO catalog_partition (id, dataset_id, key, start_at, end_at, current_revision_id,
    created_at, updated_at)
SELECT id, dataset_id, to_char(date_trunc('day', now()) - age * interval '1 day',
    'YYYY-MM-DD'), date_trunc('day', now()) - age * interval '1 day',
    date_trunc('day', now()) - (age - 1) * interval '1 day', id + {revision_offset}, now(), now()
FROM seed_partition;

SELECT setval(pg_get_serial_sequence('catalog_partition', 'id'),
    (SELECT max(id) FROM catalog_partition));
SELECT setval(pg_get_serial_sequence('catalog_partitionrevision', 'id'),
    (SELECT max(id) FROM catalog_partitionrevision));
DROP TABLE seed_partition;
"""


@pytest.fixture(scope="module")
def big_catalog(django_db_setup, django_db_blocker):
    """10,000 datasets of 20 teams with 100 daily partitions each, committed once for the
    module and removed after it."""
    with django_db_blocker.unblock():
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(max(id), 0) FROM catalog_partitionrevision")
            offset = cursor.fetchone()[0]
            cursor.execute(SEED.replace("{revision_offset}", str(offset)))
            cursor.execute("ANALYZE catalog_dataset, catalog_partition, catalog_partitionrevision")
        print(
            f"\nseeded {DATASETS} datasets, {DATASETS * PARTITIONS_EACH} partitions in "
            f"{time.perf_counter() - started:.1f} s"
        )
        yield
        with connection.cursor() as cursor:
            cursor.execute(
                "TRUNCATE catalog_partition, catalog_partitionrevision, catalog_dataset, "
                "catalog_team CASCADE"
            )


@pytest.fixture
def viewer(big_catalog, make_person, client_as):
    return client_as(make_person("viewer", Team.objects.get(slug="team-1")))


def timed_get(client, url, params=None):
    started = time.perf_counter()
    response = client.get(url, params)
    return response, (time.perf_counter() - started) * 1000


def test_catalog_page_with_a_million_partitions_is_fast_and_bounded(
    viewer, django_assert_max_num_queries
):
    assert Dataset.objects.count() == DATASETS
    viewer.get("/")  # warm: connection, templates
    with django_assert_max_num_queries(9) as captured:
        response, ms = timed_get(viewer, "/")
    assert response.status_code == 200
    rows = response.context["rows"]
    assert len(rows) == 50
    # Every fifth dataset's newest partition is pending: its latest ready is the one before.
    today = timezone.now().date()
    latest = {(d.pk % 5 == 0, f.latest_ready) for d, f in rows}
    assert latest == {
        (False, str(today - timedelta(days=1))),
        (True, str(today - timedelta(days=2))),
    }
    print(f"\ncatalog page: {len(captured)} queries, {ms:.0f} ms")
    assert ms < 1000


@pytest.mark.parametrize(
    "params",
    [
        {"team": "team-3", "criticality": "critical"},
        {"freshness": "no_sla"},
        {"q": "table_0999"},
        {"namespace": "s3://lake-4", "page": "20"},
    ],
)
def test_catalog_page_filters_with_a_million_partitions(
    viewer, params, django_assert_max_num_queries
):
    viewer.get("/", params)  # warm: connection, templates
    with django_assert_max_num_queries(9) as captured:
        response, ms = timed_get(viewer, "/", params)
    assert response.status_code == 200 and response.context["rows"]
    print(f"\ncatalog page {params}: {len(captured)} queries, {ms:.0f} ms")
    assert ms < 1000


def test_latest_ready_partition_is_an_index_lookup(big_catalog):
    """EXPLAIN of the page's query: the latest ready partition walks the partition_newest
    index per row of the page, never a scan of the partitions table."""
    from catalog import browse

    queryset = browse.dataset_rows(now=timezone.now())[:50]
    plan = queryset.explain()
    print("\n" + plan)
    assert "partition_newest" in plan
    assert "Seq Scan on catalog_partition " not in plan


def test_dataset_page_with_a_million_partitions_is_fast_and_bounded(
    viewer, django_assert_max_num_queries
):
    dataset = Dataset.objects.get(name="raw/table_00010")
    url = f"/datasets/{dataset.pk}/"
    viewer.get(url)  # warm
    # A fixed count whatever the history: who needs it by when, and what lateness it
    # causes downstream (its blast radius), are one read each.
    with django_assert_max_num_queries(24) as captured:
        response, ms = timed_get(viewer, url)
    assert response.status_code == 200
    cells = response.context["cells"]
    # "awaiting": the newest period's deadline (06:00 UTC) is still ahead when this runs
    # between midnight and 06:00 UTC.
    statuses = {"on_time", "late", "due", "missing", "awaiting"}
    assert len(cells) == 30 and {c.status for c in cells} <= statuses
    print(f"\ndataset page: {len(captured)} queries, {ms:.0f} ms")
    assert ms < 1000
