"""The watchdog benchmark's database (``watchdog.py``): migrate, seed with ``INSERT ...
SELECT generate_series`` (monitors, channels, a month of history), arm and clear the due
work each timing needs. Runs in the bench process after ``django.setup()``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from bench.common import ROOT, fill_required


def migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def sql(statement: str, params: list | dict | None = None) -> list[tuple]:
    from django.db import connection

    statement = fill_required(statement, _fetch, FILLED_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


# The seeding INSERTs name the columns of the models as written; a NOT NULL column added
# since (no database default: Django keeps defaults in Python) gets its type's zero value,
# and the report lists it.
FILLED_COLUMNS: dict[str, list[str]] = {}


def _fetch(query: str, params: list) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchall()


CHANNELS = 100

SEED_CHANNELS = """
INSERT INTO watchdog_channel (name, kind, target, secret_encrypted, owner, created_at)
SELECT 'pagerduty team-' || g, 'pagerduty', 'R' || lpad(g::text, 31, '0'), '', 'team-' || g,
       now()
FROM generate_series(0, %(channels)s - 1) g
"""

# g % 4: 0, 1 period (period 1 h, 6 h or 1 day, grace 60 s); 2 deadline; 3 deadline with a
# daily partition (cron "M H * * *" from g, grace 600 s). The ``due-`` ones (g % stride < 4:
# every kind) are armed later; until then every check_at lies 15 min to a day ahead.
SEED_MONITORS = """
WITH s AS (
  SELECT g, g %% 4 AS k, random() AS r,
         (ARRAY[3600, 21600, 86400])[1 + (g / 4) %% 3] AS period,
         g %% 60 AS cron_minute, (g / 60) %% 24 AS cron_hour,
         now() + interval '15 minutes' AS horizon
  FROM generate_series(1, %(n)s) g
), t AS (
  SELECT s.*,
    CASE WHEN k < 2 THEN 60 ELSE 600 END AS grace,
    CASE WHEN k < 2 THEN
      horizon + r * (period - 900) * interval '1 second' - interval '60 seconds'
    ELSE
      date_trunc('day', now(), 'UTC') + cron_hour * interval '1 hour'
        + cron_minute * interval '1 minute'
    END AS d0
  FROM s
), u AS (
  SELECT t.*,
    CASE WHEN k >= 2 AND d0 + grace * interval '1 second' <= horizon
         THEN d0 + interval '1 day' ELSE d0 END AS deadline
  FROM t
)
INSERT INTO watchdog_monitor (
  ping_key, name, owner, external_id, external_version, kind, period_seconds, cron,
  timezone, partitioning, partition_timezone, grace_seconds, max_runtime_seconds, post_only,
  state, deadline_at, check_at, last_ping_at, last_ping_kind, last_success_at,
  last_partition, last_start_at, rate_window_start, rate_count, created_at, updated_at)
SELECT
  gen_random_uuid(),
  CASE WHEN g %% %(stride)s < 4 THEN 'due-' ELSE 'bench-' END || g,
  'team-' || (g %% %(channels)s), '', '',
  CASE WHEN k < 2 THEN 'period' ELSE 'deadline' END,
  CASE WHEN k < 2 THEN period END,
  CASE WHEN k < 2 THEN '' ELSE cron_minute || ' ' || cron_hour || ' * * *' END,
  'UTC', CASE WHEN k = 3 THEN 'daily' ELSE '' END, 'UTC', grace, NULL, false,
  'up', deadline, deadline + grace * interval '1 second',
  CASE WHEN k < 2 THEN deadline - period * interval '1 second' ELSE now() - interval '1 hour'
  END,
  'success',
  CASE WHEN k < 2 THEN deadline - period * interval '1 second' ELSE now() - interval '1 hour'
  END,
  '', NULL, NULL, 0, now(), now()
FROM u ORDER BY g
"""

LINK_CHANNELS = """
INSERT INTO watchdog_monitor_channels (monitor_id, channel_id)
SELECT m.id, c.id FROM watchdog_monitor m JOIN watchdog_channel c
  ON c.name = 'pagerduty ' || m.owner
WHERE m.name LIKE %(pattern)s
"""

# Makes the ``due-`` monitors due again: period ones missed a deadline 1-11 min ago, deadline
# ones their cron firing before now (one deadline each). Incidents and pages are emptied
# first, so every round judges the same work.
ARM_DUE = """
UPDATE watchdog_monitor SET
  state = 'up',
  deadline_at = x.deadline,
  check_at = x.deadline + grace_seconds * interval '1 second',
  last_success_at = CASE WHEN kind = 'period'
    THEN x.deadline - period_seconds * interval '1 second' ELSE last_success_at END
FROM (
  SELECT id,
    CASE WHEN kind = 'period' THEN
      now() - (grace_seconds + 60 + random() * 600) * interval '1 second'
    ELSE
      date_trunc('day', now(), 'UTC')
        + split_part(cron, ' ', 2)::int * interval '1 hour'
        + split_part(cron, ' ', 1)::int * interval '1 minute'
        - CASE WHEN date_trunc('day', now(), 'UTC')
                    + split_part(cron, ' ', 2)::int * interval '1 hour'
                    + split_part(cron, ' ', 1)::int * interval '1 minute'
                    + grace_seconds * interval '1 second' > now()
               THEN interval '1 day' ELSE interval '0' END
    END AS deadline
  FROM watchdog_monitor WHERE name LIKE 'due-%%'
) x
WHERE watchdog_monitor.id = x.id
"""


# Each due- monitor gets a PagerDuty channel (routing key) of its own: 1,000 triggers are
# 1,000 pages. (More than WATCHDOG_PAGE_GROUP_THRESHOLD due triggers for one channel in a
# cycle go out as one grouped page; the "grouped" round measures that path.)
SEED_DUE_CHANNELS = """
INSERT INTO watchdog_channel (name, kind, target, secret_encrypted, owner, created_at)
SELECT 'pagerduty ' || name, 'pagerduty', 'D' || lpad(id::text, 31, '0'), '', owner, now()
FROM watchdog_monitor WHERE name LIKE 'due-%%'
"""
LINK_DUE_OWN = """
INSERT INTO watchdog_monitor_channels (monitor_id, channel_id)
SELECT m.id, c.id FROM watchdog_monitor m JOIN watchdog_channel c ON c.name = 'pagerduty ' || m.name
WHERE m.name LIKE 'due-%%'
"""
# The grouped round: the due- monitors share GROUPED_CHANNELS team channels instead.
GROUPED_CHANNELS = 20
LINK_DUE_SHARED = """
INSERT INTO watchdog_monitor_channels (monitor_id, channel_id)
SELECT m.id, c.id
FROM (SELECT id, row_number() OVER (ORDER BY id) %% %(k)s AS slot
      FROM watchdog_monitor WHERE name LIKE 'due-%%') m
JOIN watchdog_channel c ON c.name = 'pagerduty team-' || m.slot
"""


def link_due(shared: bool) -> None:
    sql(
        "DELETE FROM watchdog_monitor_channels WHERE monitor_id IN "
        "(SELECT id FROM watchdog_monitor WHERE name LIKE 'due-%%')",
        [],
    )
    if shared:
        sql(LINK_DUE_SHARED, {"k": GROUPED_CHANNELS})
    else:
        sql(LINK_DUE_OWN, [])


def seed(n: int, due: int) -> dict[str, Any]:
    started = time.perf_counter()
    stride = max(4, 4 * (n // max(1, due)))  # 4 consecutive monitors (one of each kind)
    sql(SEED_CHANNELS, {"channels": CHANNELS})
    sql(SEED_MONITORS, {"n": n, "channels": CHANNELS, "stride": stride})
    sql(LINK_CHANNELS, {"pattern": "bench-%"})
    sql(SEED_DUE_CHANNELS, [])
    link_due(shared=False)
    sql(SEED_HISTORY, [])
    sql(SEED_HISTORY_PAGES, [])
    seconds = time.perf_counter() - started
    sql("VACUUM ANALYZE")  # every table, channels and links included (autovacuum may be off)
    kinds = sql(
        "SELECT kind, partitioning <> '', count(*), min(check_at) - now(), max(check_at) - now() "
        "FROM watchdog_monitor GROUP BY 1, 2 ORDER BY 1, 2"
    )
    return {
        "monitors": n,
        "due_monitors": sql("SELECT count(*) FROM watchdog_monitor WHERE name LIKE 'due-%%'", [])[
            0
        ][0],
        "channels": f"{CHANNELS} team channels (owner team-N) for the bench- monitors; one "
        "of its own for each due- monitor",
        "seed_seconds": round(seconds, 2),
        "kinds": [
            {
                "kind": k,
                "partitioned": bool(p),
                "count": c,
                "check_at_from_now_s": [round(lo.total_seconds()), round(hi.total_seconds())],
            }
            for k, p, c, lo, hi in kinds
        ],
        "history": {
            "incidents": sql("SELECT count(*) FROM watchdog_incident")[0][0],
            "pages": sql("SELECT count(*) FROM watchdog_page")[0][0],
            "what": "one resolved incident a month ago per bench- monitor, with its sent "
            "trigger and resolve pages",
        },
        "method": "INSERT ... SELECT generate_series (channels, monitors, monitor_channels, "
        "history)",
    }


def vacuum() -> None:
    """What autovacuum would do between rounds (it may be off on this server)."""
    for table in (
        "watchdog_monitor",
        "watchdog_incident",
        "watchdog_page",
        "watchdog_pagegroup",
        "watchdog_monitor_channels",
        "watchdog_loopstate",
        "watchdog_run",
    ):
        sql(f"VACUUM ANALYZE {table}")


# History, as a watchdog that has run for a while has: per bench- monitor, one resolved
# incident a month ago with its sent trigger and resolve pages (100k incidents, 200k pages).
SEED_HISTORY = """
INSERT INTO watchdog_incident (monitor_id, reason, deadline_at, partition, summary, opened_at,
                               resolved_at)
SELECT id, 'missed', now() - interval '30 days' + (id %% 1440) * interval '1 minute', '',
       name || ': no ping by the deadline', now() - interval '30 days',
       now() - interval '29 days'
FROM watchdog_monitor WHERE name LIKE 'bench-%%'
"""
SEED_HISTORY_PAGES = """
INSERT INTO watchdog_page (incident_id, group_id, channel_id, action, state, attempts,
                           next_attempt_at, lease_until, claim_token, last_status, last_error,
                           sent_at, created_at)
SELECT i.id, NULL, mc.channel_id, a.action, 'sent', 1, i.opened_at, NULL, NULL, 202, '',
       i.opened_at, i.opened_at
FROM watchdog_incident i
JOIN watchdog_monitor_channels mc ON mc.monitor_id = i.monitor_id
CROSS JOIN (VALUES ('trigger'), ('resolve')) a(action)
"""


def clear_due_work() -> None:
    """Remove what judging the due- monitors wrote (keeps the seeded history)."""
    sql(
        "DELETE FROM watchdog_page WHERE group_id IS NOT NULL OR incident_id IN ("
        "SELECT i.id FROM watchdog_incident i JOIN watchdog_monitor m ON m.id = i.monitor_id "
        "WHERE m.name NOT LIKE 'bench-%%')",
        [],
    )
    sql("DELETE FROM watchdog_pagegroup", [])
    sql(
        "DELETE FROM watchdog_incident WHERE monitor_id IN ("
        "SELECT id FROM watchdog_monitor WHERE name NOT LIKE 'bench-%%')",
        [],
    )


def arm_due() -> int:
    clear_due_work()
    sql(ARM_DUE)
    vacuum()
    return sql("SELECT count(*) FROM watchdog_monitor WHERE check_at <= now()")[0][0]
