"""History for ``soak.py``, written with ``INSERT ... SELECT generate_series`` on psycopg.

``seed_catalog(conn, first_day, last_day, ...)`` writes, for every dataset of the catalog
database and every period whose start lies in ``[now - first_day days, now - last_day
days)``: the partition, its ready revision (the partition's current one) and readiness
event, the ``partition.ready`` notification, one delivery per subscription (one in 100 a
dead letter with five attempts, the others succeeded with one) and their attempts, the
endpoints' hourly success counters of those deliveries, and an idempotency record for one
publish in three; plus ``lineage_per_hour`` processed raw
lineage events for every hour of the range. ``seed_watchdog`` writes the watchdog's pings
(one per monitor per hour), and one resolved incident a week per monitor with its two sent
pages.

Rows that point at each other get ids computed from one running number (the identity
columns are "by default", and the foreign keys are deferred), so nothing is updated after
it is written; the sequences are moved past them at the end. Timestamps follow the
period: a daily partition is ready 3 h after its day ends, its deliveries finish a second
later. The INSERTs name the models' columns; a NOT NULL column added since gets its type's
zero value (``FILLED`` lists them for the report).
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import fill_required

FILLED: dict[str, list[str]] = {}


def run(conn, statement: str, params: dict | None = None) -> int:
    """Execute one seeding statement (missing NOT NULL columns filled); rows written."""
    statement = fill_required(
        statement, lambda q, p: conn.execute(q, p).fetchall(), FILLED, {"jsonb": "'{}'::jsonb"}
    )
    cursor = conn.execute(statement, params or {})
    return max(cursor.rowcount, 0)


# The periods of the range, one row each: n numbers it (ids derive from n).
PERIODS = """
CREATE TEMP TABLE soak_h ON COMMIT DROP AS
SELECT %(base)s + row_number() OVER (ORDER BY p.start_at, d.id) AS n,
       d.id AS dataset_id, d.owner_id, d.partitioning,
       CASE WHEN d.partitioning = 'hourly' THEN to_char(p.start_at, 'YYYY-MM-DD"T"HH24')
            ELSE to_char(p.start_at, 'YYYY-MM-DD') END AS key,
       p.start_at, p.end_at,
       least(p.end_at + CASE WHEN d.partitioning = 'hourly' THEN interval '10 minutes'
                             ELSE interval '3 hours' END, now()) AS ready_at
FROM catalog_dataset d
CROSS JOIN LATERAL (
  SELECT s AS start_at,
         s + CASE WHEN d.partitioning = 'hourly' THEN interval '1 hour'
                  ELSE interval '1 day' END AS end_at
  FROM generate_series(
         %(day0)s - %(first_day)s * interval '1 day',
         %(day0)s - %(last_day)s * interval '1 day' - interval '1 hour',
         CASE WHEN d.partitioning = 'hourly' THEN interval '1 hour' ELSE interval '1 day' END) s
) p
WHERE d.partitioning IN ('daily', 'hourly')
"""

CATALOG = {
    "catalog_partitionrevision": """
INSERT INTO catalog_partitionrevision (id, version, state, manifest, metadata, code_version,
    detected_by, ready_at, created_at, partition_id, restatement_id)
OVERRIDING SYSTEM VALUE SELECT n, '', 'ready',
    jsonb_build_object('expected_files', 4, 'row_count', 18000 + n %% 500), '{}'::jsonb, '',
    'event', ready_at, ready_at, n, NULL
FROM soak_h
""",
    "catalog_partition": """
INSERT INTO catalog_partition (id, key, start_at, end_at, created_at, updated_at, dataset_id,
    current_revision_id)
OVERRIDING SYSTEM VALUE SELECT n, key, start_at, end_at, ready_at, ready_at, dataset_id, n
FROM soak_h
""",
    "catalog_readinessevent": """
INSERT INTO catalog_readinessevent (id, state, source, restated_version, payload, received_at,
    api_key_id, dataset_id, partition_id, revision_id, published_by_id)
OVERRIDING SYSTEM VALUE SELECT n, 'ready', 'api', NULL,
    jsonb_build_object('partition', key, 'state', 'ready',
                       'manifest', jsonb_build_object('expected_files', 4)),
    ready_at, NULL, dataset_id, n, n, owner_id
FROM soak_h
""",
    "catalog_notification": """
INSERT INTO catalog_notification (id, type, dedup_key, payload, created_at, dataset_id)
SELECT md5('soak-notification-' || n)::uuid, 'partition.ready', 'readiness-event:' || n,
    jsonb_build_object('type', 'partition.ready', 'timestamp', ready_at,
        'data', jsonb_build_object('dataset', jsonb_build_object('id', dataset_id),
                                   'partition', key, 'revision', n, 'state', 'ready',
                                   'ready_at', ready_at,
                                   'manifest', jsonb_build_object('expected_files', 4))),
    ready_at, dataset_id
FROM soak_h
""",
    "catalog_delivery": """
INSERT INTO catalog_delivery (id, state, attempts, next_attempt_at, claimed_until, claim_token,
    last_attempt_at, last_status_code, last_error, created_at, endpoint_id, notification_id,
    finished_at, last_error_kind, attempts_before_replay)
OVERRIDING SYSTEM VALUE SELECT
    3 * h.n + s.j,
    CASE WHEN (3 * h.n + s.j) %% 100 = 0 THEN 'dead' ELSE 'succeeded' END,
    CASE WHEN (3 * h.n + s.j) %% 100 = 0 THEN 5 ELSE 1 END,
    h.ready_at, NULL, NULL, h.ready_at + interval '1 second',
    CASE WHEN (3 * h.n + s.j) %% 100 = 0 THEN 500 ELSE 204 END,
    CASE WHEN (3 * h.n + s.j) %% 100 = 0 THEN 'HTTP 500' ELSE '' END,
    h.ready_at, s.endpoint_id, md5('soak-notification-' || h.n)::uuid,
    h.ready_at + interval '1 second',
    CASE WHEN (3 * h.n + s.j) %% 100 = 0 THEN 'http_status' ELSE '' END, 0
FROM soak_h h JOIN soak_subs s ON s.dataset_id = h.dataset_id
""",
    "catalog_deliveryattempt": """
INSERT INTO catalog_deliveryattempt (number, started_at, duration_ms, status_code, decision,
    error_kind, error, response_excerpt, next_attempt_in_seconds, delivery_id, endpoint_id)
SELECT a, h.ready_at, 12, CASE WHEN dead THEN 500 ELSE 204 END,
    CASE WHEN NOT dead THEN 'succeeded' WHEN a < 5 THEN 'retry' ELSE 'dead' END,
    CASE WHEN dead THEN 'http_status' ELSE '' END, '', '',
    CASE WHEN dead AND a < 5 THEN 60 END, 3 * h.n + s.j, s.endpoint_id
FROM soak_h h JOIN soak_subs s ON s.dataset_id = h.dataset_id
CROSS JOIN LATERAL (SELECT (3 * h.n + s.j) %% 100 = 0 AS dead) x
CROSS JOIN LATERAL generate_series(1, CASE WHEN x.dead THEN 5 ELSE 1 END) a
""",
    # The endpoints' hourly success counters of the deliveries just written (their ids
    # derive from the chunk's n), as the workers keep them: what their health reads.
    "catalog_endpointsuccesshour": """
INSERT INTO catalog_endpointsuccesshour (endpoint_id, hour, succeeded)
SELECT d.endpoint_id, date_trunc('hour', d.finished_at, 'UTC'), count(*)
FROM catalog_delivery d
WHERE d.id BETWEEN (SELECT 3 * min(n) FROM soak_h) AND (SELECT 3 * max(n) + 2 FROM soak_h)
  AND d.state = 'succeeded'
GROUP BY 1, 2 ORDER BY 1, 2
ON CONFLICT (endpoint_id, hour) DO UPDATE
SET succeeded = catalog_endpointsuccesshour.succeeded + excluded.succeeded
""",
    "catalog_idempotencyrecord": """
INSERT INTO catalog_idempotencyrecord (key, fingerprint, status_code, response_body,
    created_at, expires_at, team_id)
SELECT 'soak-' || n, md5(key), 201, jsonb_build_object('partition', key, 'state', 'ready'),
    ready_at, ready_at + interval '48 hours', owner_id
FROM soak_h WHERE n %% 3 = 0
""",
}

LINEAGE = """
INSERT INTO lineage_lineageevent (verified, kind, event_type, event_time,
    event_time_assumed_utc, run_id, job_namespace, job_name, payload, problems, fingerprint,
    content_encoding, body_bytes, received_at, state, attempts, next_attempt_at, claimed_until,
    claim_token, processed_at, last_error, api_key_id, team_id)
SELECT true, 'run', CASE WHEN i %% 2 = 0 THEN 'START' ELSE 'COMPLETE' END, t, false,
    md5('soak-run-' || hour_n || '-' || i / 2)::uuid, 'airflow://soak', 'job_' || i %% 500,
    jsonb_build_object('eventType', CASE WHEN i %% 2 = 0 THEN 'START' ELSE 'COMPLETE' END,
        'eventTime', t, 'run', jsonb_build_object('runId', md5('soak-run-' || hour_n || '-'
        || i / 2)::uuid), 'job', jsonb_build_object('namespace', 'airflow://soak',
        'name', 'job_' || i %% 500),
        'inputs', jsonb_build_array(jsonb_build_object('namespace', 's3://soak',
            'name', 'raw/table_' || lpad((i %% 1000)::text, 5, '0'))),
        'outputs', jsonb_build_array(jsonb_build_object('namespace', 's3://soak',
            'name', 'curated/out_' || i %% 500)),
        'producer', 'https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python',
        'schemaURL', 'https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent'),
    '[]'::jsonb, md5('soak-lineage-' || hour_n || '-' || i), '', 700, t, 'processed', 1, t,
    NULL, NULL, t + interval '2 seconds', '', NULL, %(team)s
FROM (
  SELECT h AS t0, (extract(epoch FROM h)::bigint / 3600) AS hour_n
  FROM generate_series(%(day0)s - %(first_day)s * interval '1 day',
                       %(day0)s - %(last_day)s * interval '1 day' - interval '1 hour',
                       interval '1 hour') h
) hours
CROSS JOIN LATERAL generate_series(0, %(per_hour)s - 1) i
CROSS JOIN LATERAL (SELECT t0 + (i * 3600.0 / %(per_hour)s) * interval '1 second' AS t) x
"""

WATCHDOG = {
    "watchdog_ping": """
INSERT INTO watchdog_ping (kind, exit_status, partition, run_id, received_at, method,
    remote_addr, user_agent, body, duration_ms, monitor_id)
SELECT 'success', NULL, '', '', t, 'GET', '10.0.0.1', 'curl/8.5.0', '', NULL, m.id
FROM watchdog_monitor m
CROSS JOIN generate_series(%(day0)s - %(first_day)s * interval '1 day',
                           %(day0)s - %(last_day)s * interval '1 day' - interval '1 hour',
                           interval '1 hour') t
""",
    "watchdog_incident": """
INSERT INTO watchdog_incident (monitor_id, reason, deadline_at, partition, summary, opened_at,
    resolved_at, part_of_id)
SELECT m.id, 'missed', t, '', m.name || ': no ping by the deadline',
    t + interval '10 minutes', t + interval '40 minutes', NULL
FROM watchdog_monitor m
CROSS JOIN generate_series(%(day0)s - %(first_day)s * interval '1 day',
                           %(day0)s - %(last_day)s * interval '1 day' - interval '1 hour',
                           interval '7 days') t
""",
    "watchdog_page": """
INSERT INTO watchdog_page (incident_id, group_id, channel_id, action, state, attempts,
    next_attempt_at, lease_until, claim_token, last_status, last_error, sent_at, created_at)
SELECT i.id, NULL, mc.channel_id, a.action, 'sent', 1, i.opened_at, NULL, NULL, 202, '',
    i.opened_at, i.opened_at
FROM watchdog_incident i
JOIN watchdog_monitor_channels mc ON mc.monitor_id = i.monitor_id
CROSS JOIN (VALUES ('trigger'), ('resolve')) a(action)
WHERE i.id > %(after)s
""",
}

SEQUENCES = {
    "catalog_partition": "id",
    "catalog_partitionrevision": "id",
    "catalog_readinessevent": "id",
    "catalog_delivery": "id",
}


def _day0(conn) -> Any:
    return conn.execute("SELECT date_trunc('day', now(), 'UTC')").fetchone()[0]


def seed_catalog(
    conn, *, first_day: int, last_day: int, lineage_per_hour: int, chunk_days: int = 15
) -> dict[str, dict[str, float]]:
    """Write the catalog's history for periods starting ``first_day`` .. ``last_day`` days
    before today (UTC midnight; ``last_day`` excluded), ``chunk_days`` at a time, each
    chunk one transaction. ``conn``: a psycopg connection (autocommit off) to the catalog
    database, whose datasets and subscriptions exist. Returns per table the rows written
    and the seconds spent."""
    day0 = _day0(conn)
    stats: dict[str, dict[str, float]] = {}

    def add(table: str, rows: int, seconds: float) -> None:
        entry = stats.setdefault(table, {"rows": 0, "seconds": 0.0})
        entry["rows"] += rows
        entry["seconds"] = round(entry["seconds"] + seconds, 3)

    team = conn.execute("SELECT min(owner_id) FROM catalog_dataset").fetchone()[0]
    began = time.perf_counter()
    for start in range(first_day, last_day, -chunk_days):
        end = max(last_day, start - chunk_days)
        base = conn.execute(
            "SELECT greatest((SELECT coalesce(max(id), 0) FROM catalog_partition),"
            " (SELECT coalesce(max(id), 0) FROM catalog_partitionrevision),"
            " (SELECT coalesce(max(id), 0) FROM catalog_readinessevent),"
            " (SELECT coalesce(max(id), 0) / 3 + 1 FROM catalog_delivery))"
        ).fetchone()[0]
        params = {"base": base, "day0": day0, "first_day": start, "last_day": end}
        conn.execute(
            "CREATE TEMP TABLE soak_subs ON COMMIT DROP AS SELECT dataset_id, endpoint_id,"
            " (row_number() OVER (PARTITION BY dataset_id ORDER BY id) - 1) % 3 AS j"
            " FROM catalog_subscription WHERE endpoint_id IS NOT NULL"
        )
        t0 = time.perf_counter()
        conn.execute(PERIODS, params)
        add("(periods)", 0, time.perf_counter() - t0)
        for table, statement in CATALOG.items():
            t0 = time.perf_counter()
            add(table, run(conn, statement, params), time.perf_counter() - t0)
        t0 = time.perf_counter()
        rows = run(conn, LINEAGE, {**params, "per_hour": lineage_per_hour, "team": team})
        add("lineage_lineageevent", rows, time.perf_counter() - t0)
        conn.commit()
        print(
            f"  catalog history: days {start}..{end} written, {time.perf_counter() - began:.0f} s"
            f" so far ({sum(int(v['rows']) for v in stats.values()):,} rows)",
            flush=True,
        )
    for table, column in SEQUENCES.items():
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"  # noqa: S608
            f" (SELECT coalesce(max({column}), 1) FROM {table}))"
        )
    conn.commit()
    return stats


def seed_watchdog(conn, *, first_day: int, last_day: int) -> dict[str, dict[str, float]]:
    """The watchdog's history (pings, resolved incidents and their sent pages) for the same
    range as ``seed_catalog``; ``conn`` to the watchdog database, monitors and channels
    already there. Returns rows and seconds per table."""
    day0 = _day0(conn)
    after = conn.execute("SELECT coalesce(max(id), 0) FROM watchdog_incident").fetchone()[0]
    params = {"day0": day0, "first_day": first_day, "last_day": last_day, "after": after}
    stats = {}
    for table, statement in WATCHDOG.items():
        t0 = time.perf_counter()
        rows = run(conn, statement, params)
        stats[table] = {"rows": rows, "seconds": round(time.perf_counter() - t0, 3)}
        conn.commit()
    return stats


# Monitors for one dataset in ``per_dataset`` (hourly heartbeats, pinged on time), each on
# its team's PagerDuty channel; written into the template so both databases have them.
MONITORS = """
INSERT INTO watchdog_monitor (ping_key, name, owner, external_id, external_version, kind,
    period_seconds, cron, timezone, partitioning, partition_timezone, grace_seconds,
    max_runtime_seconds, post_only, state, deadline_at, check_at, last_ping_at,
    last_ping_kind, last_success_at, last_partition, last_start_at, rate_window_start,
    rate_count, created_at, updated_at)
SELECT md5('soak-monitor-' || g)::uuid, 'soak-' || g, 'team-' || g %% 20, '', '', 'period',
    3600, '', 'UTC', '', 'UTC', 600, NULL, false, 'up', now() + interval '1 hour',
    now() + interval '70 minutes', now(), 'success', now(), '', NULL, NULL, 0, now(), now()
FROM generate_series(1, %(monitors)s) g
"""
CHANNELS = """
INSERT INTO watchdog_channel (name, kind, target, secret_encrypted, owner, created_at)
SELECT 'pagerduty team-' || g, 'pagerduty', 'R' || lpad(g::text, 31, '0'), '', 'team-' || g,
    now()
FROM generate_series(0, 19) g
"""
LINK = """
INSERT INTO watchdog_monitor_channels (monitor_id, channel_id)
SELECT m.id, c.id FROM watchdog_monitor m JOIN watchdog_channel c
  ON c.name = 'pagerduty ' || m.owner
"""


def seed_monitors(conn, monitors: int) -> None:
    """``monitors`` hourly heartbeat monitors on 20 team channels (watchdog database)."""
    run(conn, CHANNELS)
    run(conn, MONITORS, {"monitors": monitors})
    run(conn, LINK)
    conn.commit()
