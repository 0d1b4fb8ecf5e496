"""The scripted scenario: three teams, datasets with three completion signals, a lost
event, an incomplete manifest, a restatement, a missed deadline that is paged and recovers,
a storage check in the watchdog, and runtime lineage from the openlineage-python client and
dbt-ol."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import s3fs
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

from . import dbt
from .api import Api
from .progress import DemoFailed, say, step, wait_for
from .receivers import HeartbeatReceiver, PagerDutyReceiver, WebhookReceiver
from .report import Report
from .stack import S3Server, Stack

GRACE_SECONDS = 20  # the critical dataset's SLA grace
LEAD_SECONDS = 75  # its deadline is the first whole minute at least this far ahead
PRODUCER = "https://tidemark.example.com/demo"  # OpenLineage's producer URI


@dataclass
class World:
    """Names of this run (a tag keeps runs apart in a configured database)."""

    tag: str
    bucket: str = ""
    source: str = ""  # the storage source's name in the settings
    namespace: str = ""
    duckdb_file: str = ""
    duckdb_namespace: str = ""
    duckdb_database: str = ""
    teams: dict[str, str] = field(default_factory=dict)
    routing_key: str = field(default_factory=lambda: secrets.token_hex(16))

    def __post_init__(self) -> None:
        word = self.tag.replace("-", "_")
        self.bucket = f"tidemark-demo{self.tag}"
        self.source = f"lake{word}"
        self.namespace = f"s3://{self.bucket}"
        self.duckdb_database = f"warehouse{word}"
        self.duckdb_file = f"{self.duckdb_database}.duckdb"
        self.duckdb_namespace = f"duckdb://{self.duckdb_file}"
        self.teams = {t: f"{t}{self.tag}" for t in ("orders", "web", "analytics")}


class Scenario:
    def __init__(
        self,
        *,
        stack: Stack,
        s3: S3Server,
        world: World,
        hooks: WebhookReceiver,
        pagerduty: PagerDutyReceiver,
        heartbeat: HeartbeatReceiver,
        dbt_venv: Path,
        report: Report,
    ) -> None:
        self.stack, self.s3, self.w = stack, s3, world
        self.hooks, self.pagerduty, self.heartbeat = hooks, pagerduty, heartbeat
        self.dbt_venv = dbt_venv
        self.report = report
        self.keys: dict[str, Api] = {}
        self.datasets: dict[str, dict] = {}
        self.owner: dict[str, str] = {}  # dataset name -> owner role
        self.published = 0
        self.lineage_sent = 0
        self.started_at = datetime.now(UTC)
        self.fs = s3fs.S3FileSystem(**s3.options(), use_listings_cache=False)

    # --- set-up ----------------------------------------------------------------------------

    def create_teams(self) -> None:
        """Teams and keys, with the commands an operator runs."""
        step("Three teams and their API keys (manage.py create_team, create_api_key)")
        w = self.w
        specs = {
            "orders": ("Orders platform", ["--paging-routing-key", w.routing_key]),
            "web": ("Web analytics platform", []),
            "analytics": ("Analytics engineering", []),
        }
        for role, (name, extra) in specs.items():
            slug = w.teams[role]
            say(f"  $ manage.py create_team {slug} --name {name!r} {' '.join(extra)}".rstrip())
            self.stack.manage("create_team", slug, "--name", name, *extra)
            token = self.stack.manage("create_api_key", slug, "--name", "demo").splitlines()[-1]
            self.keys[role] = Api(self.stack.url, token.strip(), who=f"team {slug}")
        self.wd_token = self.stack.manage(
            "create_watchdog_token", f"demo-on-call{w.tag}", watchdog=True
        ).splitlines()[-1]

    def register(self, deadline: datetime) -> None:
        step("Datasets, with three completion signals and SLAs (POST /api/v1/datasets)")
        w = self.w
        self.fs.mkdir(w.bucket)
        cron = f"{deadline.minute} {deadline.hour} * * *"
        specs = [
            (
                "orders",
                "raw/orders",
                dict(
                    description="Orders, one partition a day; the checkout service publishes.",
                    criticality="critical",
                    partitioning="daily",
                    completion_signal="event",
                    sla_cron=cron,
                    sla_timezone="UTC",
                    sla_grace_seconds=GRACE_SECONDS,
                ),
            ),
            (
                "orders",
                "raw/payments",
                dict(
                    description="Payment provider exports with a manifest; nobody publishes.",
                    criticality="medium",
                    partitioning="daily",
                    completion_signal="manifest",
                    storage_source=w.source,
                    location_template="raw/payments/dt={partition}/",
                ),
            ),
            (
                "web",
                "raw/clicks",
                dict(
                    description="Click stream; the loader writes _SUCCESS and publishes.",
                    criticality="high",
                    partitioning="daily",
                    completion_signal="success_marker",
                    storage_source=w.source,
                    location_template="raw/clicks/dt={partition}/",
                    sla_cron=cron,
                    sla_timezone="UTC",
                    sla_grace_seconds=GRACE_SECONDS,
                ),
            ),
            (
                "web",
                "curated/sessions",
                dict(description="Sessions built from clicks.", partitioning="daily"),
            ),
        ]
        for role, name, fields in specs:
            body = {"namespace": w.namespace, "name": name, **fields}
            self.datasets[name] = self.keys[role].post("/api/v1/datasets", json=body)
            self.owner[name] = role
            signal = fields.get("completion_signal", "event")
            sla = f", SLA '{cron}' UTC + {GRACE_SECONDS} s" if "sla_cron" in fields else ""
            say(f"  {w.teams[role]:>10} registers {name} ({signal}{sla})")
        for table in ("raw_orders", "raw_refunds"):
            name = f"{w.duckdb_database}.main.{table}"
            self.datasets[table] = self.keys["orders"].post(
                "/api/v1/datasets",
                json={
                    "namespace": w.duckdb_namespace,
                    "name": name,
                    "description": "Loaded into the warehouse by the orders team.",
                },
            )
            say(f"  {w.teams['orders']:>10} registers {w.duckdb_namespace} {name}")

    def subscribe(self) -> None:
        step("Consumers declare what they read, with webhook endpoints (POST /subscriptions)")
        w = self.w
        plan = [
            ("analytics", "raw/orders", True),
            ("analytics", "raw/payments", True),
            ("analytics", "raw/clicks", True),
            ("web", "raw/orders", True),
            ("analytics", "raw_orders", False),  # read by dbt; declared, no webhook
        ]
        for role, dataset, with_hook in plan:
            body = {"dataset_id": self.datasets[dataset]["id"]}
            if with_hook:
                body["endpoint_url"] = self.hooks.hook_url(w.teams[role])
            answer = self.keys[role].post("/api/v1/subscriptions", json=body)
            if answer.get("endpoint_secret"):
                self.hooks.secrets[w.teams[role]] = answer["endpoint_secret"]
            where = f" -> {body['endpoint_url']}" if with_hook else " (no webhook)"
            say(f"  {w.teams[role]:>10} subscribes to {self.datasets[dataset]['name']}{where}")
        self.keys["analytics"].post(
            "/api/v1/claims",
            json={"kind": "job_namespace", "pattern": f"airflow://{w.teams['analytics']}"},
        )
        self.keys["analytics"].post(
            "/api/v1/claims",
            json={"kind": "job_namespace", "pattern": f"dbt://{w.teams['analytics']}"},
        )
        say(f"  {w.teams['analytics']:>10} claims job namespaces airflow:// and dbt://")

    # --- producers -------------------------------------------------------------------------

    def publish(self, role: str, name: str, partition: str, **extra) -> dict:
        body = {"namespace": self.w.namespace, "name": name, "partition": partition, **extra}
        answer = self.keys[role].post("/api/v1/readiness", json=body)
        self.published += 1
        version = f" version {extra['version']}" if "version" in extra else ""
        say(f"  {self.w.teams[role]:>10} publishes {name} {partition}{version}: {answer['state']}")
        return answer

    def write(self, path: str, body: bytes = b"{}\n") -> None:
        self.fs.pipe(f"{self.w.bucket}/{path}", body)

    def partition(self, name: str, key: str) -> dict | None:
        dataset_id = self.datasets[name]["id"]
        return self.keys[self.owner[name]].get(
            f"/api/v1/datasets/{dataset_id}/partitions/{key}", expect=(200, 404)
        )

    # --- the story -------------------------------------------------------------------------

    def run(self) -> None:
        self.create_teams()
        # The critical dataset's deadline: the first whole minute LEAD_SECONDS from now (cron
        # has minute granularity); the partition due then is the day that closed before it.
        now = datetime.now(UTC)
        deadline = (now + timedelta(seconds=LEAD_SECONDS)).replace(second=0, microsecond=0)
        deadline += timedelta(minutes=1)
        today = deadline.date()
        self.d1, self.d2 = _key(today - timedelta(days=1)), _key(today - timedelta(days=2))
        self.deadline = deadline
        self.register(deadline)
        self.subscribe()
        self.check_watchdog_monitors()
        self.producers()
        self.lineage_client()
        self.lineage_dbt()
        self.lost_event_found()
        self.manifest_completes()
        self.late_and_paged()
        self.recovery()
        self.lineage_results()
        self.figures()

    def check_watchdog_monitors(self) -> None:
        step("The watchdog learns the critical dataset's monitors from the catalog")
        orders = self.datasets["raw/orders"]
        say(
            f"  raw/orders: deadline {self.deadline:%H:%M} UTC, grace {GRACE_SECONDS} s, "
            f"partition due then: {self.d1} (the day that closed)"
        )

        def both():
            found = [
                m
                for m in self._watchdog(f"/api/v1/monitors?owner={self.w.teams['orders']}")
                if m.get("name", "").startswith(f"{self.w.namespace}/raw/orders ")
            ]
            return found if len(found) >= 2 else None

        monitors = wait_for(
            both, what="the data and pipeline monitors of raw/orders in the watchdog", timeout=90
        )
        self.monitors = {m["name"]: m for m in monitors}
        names = sorted(self.monitors)
        self.report.check(
            "critical dataset watched by the watchdog",
            "data + pipeline monitors",
            ", ".join(n.rsplit(" ", 1)[-1] for n in names) or "none",
            len(names) == 2,
        )
        detail = self.keys["orders"].get(f"/api/v1/datasets/{orders['id']}")
        self.pipeline_ping_url = detail.get("pipeline_ping_url")
        # On-call of web adds a monitor of its own that looks at S3 at the same deadline:
        # raw/clicks' _SUCCESS marker for the day due (WATCHDOG_STORAGE_SOURCES).
        channel = self._watchdog_post(
            "/api/v1/channels",
            {"name": "web on-call", "kind": "pagerduty", "target": self.w.routing_key},
        )
        self.clicks_monitor = self._watchdog_post(
            "/api/v1/monitors",
            {
                "name": "raw/clicks landed",
                "kind": "deadline",
                "cron": f"{self.deadline.minute} {self.deadline.hour} * * *",
                "timezone": "UTC",
                "partitioning": "daily",
                "partition_timezone": "UTC",
                "grace_seconds": GRACE_SECONDS,
                "storage_source": self.w.source,
                "storage_template": "raw/clicks/dt={partition}/",
                "storage_marker": "_SUCCESS",
                "channel_ids": [channel["id"]],
            },
        )
        say(
            "  web's on-call adds a watchdog monitor 'raw/clicks landed' for the same deadline, "
            "with a storage check of the _SUCCESS marker in S3 (no ping)"
        )

    def _watchdog_post(self, path: str, body: dict) -> dict:
        response = httpx.post(
            f"{self.stack.watchdog_url}{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.wd_token}"},
            timeout=10,
        )
        if response.status_code != 201:
            raise DemoFailed(f"watchdog POST {path}: {response.status_code} {response.text}")
        return response.json()

    def _watchdog(self, path: str):
        response = httpx.get(
            f"{self.stack.watchdog_url}{path}",
            headers={"Authorization": f"Bearer {self.wd_token}"},
            timeout=10,
        )
        if response.status_code != 200:
            raise DemoFailed(f"watchdog GET {path}: {response.status_code} {response.text}")
        body = response.json()
        return body["results"] if isinstance(body, dict) and "results" in body else body

    def producers(self) -> None:
        step("Producers write partitions to S3 (moto) and publish readiness")
        d1, d2 = self.d1, self.d2
        # raw/orders: the day before yesterday, then a rerun restates it.
        self.publish("orders", "raw/orders", d2, version="v1", code_version="git:1a2b3c4")
        self.publish("orders", "raw/orders", d2, version="v2", code_version="git:4f2c1e9")
        # raw/clicks: both days land with their _SUCCESS marker; yesterday's event is lost.
        for day in (d2, d1):
            for i in range(2):
                self.write(f"raw/clicks/dt={day}/part-{i}.json")
            self.write(f"raw/clicks/dt={day}/_SUCCESS", b"")
        say(f"  web writes raw/clicks dt={d2}/ and dt={d1}/ with _SUCCESS markers")
        self.publish("web", "raw/clicks", d2)
        say(f"  web's publish of raw/clicks {d1} is lost on the way (never sent)")
        # raw/payments: the manifest promises three files; two have landed so far.
        self.write(
            f"raw/payments/dt={d1}/_manifest.json",
            json.dumps({"expected_files": 3, "row_count": 1200}).encode(),
        )
        for i in range(2):
            self.write(f"raw/payments/dt={d1}/part-{i}.parquet", b"PAR1")
        say(f"  orders writes raw/payments dt={d1}/: _manifest.json (3 files) and 2 files")
        self.publish("web", "curated/sessions", d1)
        restated = wait_for(
            lambda: self.hooks.find(type="partition.restated", dataset="raw/orders", partition=d2),
            what=f"partition.restated of raw/orders {d2} at the consumers' webhooks",
            timeout=60,
        )
        self.report.check(
            "a restatement is told to consumers",
            f"partition.restated {d2} v1 -> v2",
            f"{restated[0].type} {d2} {restated[0].data.get('previous_version')} -> "
            f"{restated[0].data.get('version')} ({len(restated)} teams)",
            restated[0].data.get("version") == "v2"
            and restated[0].data.get("previous_version") == "v1",
        )

    def lost_event_found(self) -> None:
        step("The fallback poll finds the partition whose event was lost")
        d1 = self.d1
        found = wait_for(
            lambda: self.hooks.find(type="partition.ready", dataset="raw/clicks", partition=d1),
            what=f"the poll to find raw/clicks {d1} in S3 (beat sweeps every 60 s)",
            timeout=240,
        )
        part = self.partition("raw/clicks", d1) or {}
        detected = (part.get("current_revision") or {}).get("detected_by")
        missed = found[0].data.get("missed_event")
        self.report.check(
            "a lost event is caught by the poll",
            "ready, detected_by poll, told as a missed event",
            f"{part.get('state')}, detected_by {detected}; partition.ready with "
            f"missed_event {str(missed).lower()}",
            part.get("state") == "ready" and detected == "poll" and missed is True,
        )

    def manifest_completes(self) -> None:
        step("An incomplete manifest partition stays not ready until its last file lands")
        d1 = self.d1

        def pending():
            part = self.partition("raw/payments", d1)
            return part if part and part.get("state") == "pending" else None

        part = wait_for(
            pending,
            what=f"a sweep to see raw/payments {d1} incomplete",
            timeout=240,
        )
        reason = _poll_reason(part)
        early = self.hooks.find(type="partition.ready", dataset="raw/payments", partition=d1)
        self.report.check(
            "an incomplete manifest stays not ready",
            "pending, 2 of 3 files",
            f"{part.get('state')}: {reason}",
            part.get("state") == "pending" and "2 of 3" in reason and not early,
        )
        self.write(f"raw/payments/dt={d1}/part-2.parquet", b"PAR1")
        say(f"  orders writes the last file, raw/payments dt={d1}/part-2.parquet")
        wait_for(
            lambda: self.hooks.find(type="partition.ready", dataset="raw/payments", partition=d1),
            what=f"the poll to find raw/payments {d1} complete",
            timeout=240,
        )
        part = self.partition("raw/payments", d1) or {}
        self.report.check(
            "it is ready once its last file lands",
            "ready, partition.ready sent",
            f"{part.get('state')}, partition.ready sent",
            part.get("state") == "ready",
        )

    def late_and_paged(self) -> None:
        step("The critical dataset misses its deadline")
        d1 = self.d1
        late_at = self.deadline + timedelta(seconds=GRACE_SECONDS)
        wait = max(0.0, (late_at - datetime.now(UTC)).total_seconds())
        say(f"  raw/orders {d1} is due at {self.deadline:%H:%M:%S} UTC, late at {late_at:%H:%M:%S}")
        late = wait_for(
            lambda: self.hooks.find(type="dataset.late", dataset="raw/orders", partition=d1),
            what="dataset.late at the consumers' webhooks (freshness is judged every 60 s)",
            timeout=wait + 150,
            report_every=15,
        )
        # Each team's webhook is its own delivery: the second may follow the first a moment
        # later on a busy machine.
        late = (
            wait_for(
                lambda: (lambda found: found if len({n.team for n in found}) >= 2 else None)(
                    self.hooks.find(type="dataset.late", dataset="raw/orders", partition=d1)
                ),
                what="dataset.late at the other consumer's webhook",
                timeout=60,
                fail=False,
            )
            or late
        )
        teams = sorted({n.team for n in late})
        self.report.check(
            "consumers are told it is late",
            f"dataset.late {d1} to 2 teams",
            f"dataset.late {late[0].partition} to {len(teams)} teams ({', '.join(teams)})",
            len(teams) == 2,
        )
        # Both monitors miss the deadline: one cause, one page.
        incidents = wait_for(
            lambda: (lambda found: found if len(found) >= 2 else None)(
                [
                    incident
                    for monitor in self.monitors.values()
                    for incident in self._watchdog(
                        f"/api/v1/incidents?open=true&monitor_id={monitor['id']}"
                    )
                ]
            ),
            what="the watchdog to judge the data and pipeline monitors late",
            timeout=max(0.0, (late_at - datetime.now(UTC)).total_seconds()) + 120,
            report_every=15,
        )
        paging = [i for i in incidents if i.get("part_of") is None]
        triggers = wait_for(
            lambda: self.pagerduty.of("trigger", self.w.routing_key) or None,
            what="the watchdog to page on-call",
            timeout=60,
        )
        self.triggers = triggers
        keys = {t.dedup_key for t in triggers}
        self.report.check(
            "the watchdog pages PagerDuty",
            "1 valid trigger for both monitors' incidents",
            f"{len(triggers)} triggers for {len(incidents)} incidents, "
            f"{len(self.pagerduty.invalid)} refused as invalid",
            len(triggers) == len(paging) == 1
            and keys == {paging[0]["dedup_key"]}
            and not self.pagerduty.invalid,
        )
        monitor = wait_for(
            lambda: (lambda m: m if m["state"] not in ("new", "grace") else None)(
                self._watchdog(f"/api/v1/monitors/{self.clicks_monitor['id']}")
            ),
            what="the watchdog to judge 'raw/clicks landed' at its deadline",
            timeout=60,
        )
        self.report.check(
            "the watchdog's storage check",
            f"marker of {d1} found: up, no page",
            f"{monitor['state']}, success for {monitor.get('last_partition') or '-'} "
            f"without a ping, {monitor['open_incidents']} incidents",
            monitor["state"] == "up"
            and monitor.get("last_partition") == d1
            and monitor["open_incidents"] == 0,
        )
        freshness = self.keys["orders"].get(
            f"/api/v1/datasets/{self.datasets['raw/orders']['id']}/freshness"
        )
        say(
            f"  GET raw/orders/freshness: {freshness['state']}, "
            f"partition {freshness.get('partition_due')}"
        )
        clicks = self.keys["web"].get(
            f"/api/v1/datasets/{self.datasets['raw/clicks']['id']}/freshness"
        )
        late_clicks = self.hooks.find(type="dataset.late", dataset="raw/clicks")
        self.report.check(
            "an SLA met through the poll",
            f"raw/clicks fresh at the deadline, {d1} ready",
            f"{clicks['state']}, latest ready {clicks.get('latest_ready')}, "
            f"{len(late_clicks)} dataset.late",
            clicks["state"] == "fresh" and clicks.get("latest_ready") == d1 and not late_clicks,
        )

    def recovery(self) -> None:
        step("The partition lands: consumers are told, the pages resolve")
        d1 = self.d1
        self.write(f"raw/orders/dt={d1}/part-0.json")
        self.publish("orders", "raw/orders", d1, version="v1", code_version="git:4f2c1e9")
        if self.pipeline_ping_url:
            answer = httpx.get(f"{self.pipeline_ping_url}?rid={uuid.uuid4()}", timeout=10)
            say(f"  the orders pipeline's last task pings its monitor: {answer.status_code}")
        recovered = wait_for(
            lambda: self.hooks.find(type="dataset.recovered", dataset="raw/orders", partition=d1),
            what="dataset.recovered at the consumers' webhooks",
            timeout=60,
        )
        self.report.check(
            "consumers are told it recovered",
            f"dataset.recovered {d1}",
            f"dataset.recovered {recovered[0].partition}, late by "
            f"{recovered[0].data.get('late_by_seconds')} s",
            bool(recovered),
        )
        keys = {t.dedup_key for t in self.triggers}
        resolved = wait_for(
            lambda: (lambda r: r if keys <= r else None)(
                {e.dedup_key for e in self.pagerduty.of("resolve", self.w.routing_key)}
            ),
            what="the watchdog to resolve its pages",
            timeout=120,
        )
        self.report.check(
            "the pages are resolved",
            "a resolve per trigger's dedup_key",
            f"{len(keys & resolved)} of {len(keys)} resolved",
            keys <= resolved,
        )

    # --- lineage ---------------------------------------------------------------------------

    def lineage_client(self) -> None:
        step("Runtime lineage from the openlineage-python client")
        w = self.w
        client = OpenLineageClient(
            transport=HttpTransport(
                HttpConfig(
                    url=self.stack.url,
                    endpoint="api/v1/lineage",
                    auth=ApiKeyTokenProvider({"apiKey": self._token("analytics")}),
                )
            )
        )
        self.client_run = str(uuid.uuid4())
        job = Job(namespace=f"airflow://{w.teams['analytics']}", name="sessions_by_order.build")
        inputs = [
            InputDataset(namespace=w.namespace, name="raw/orders"),
            InputDataset(namespace=w.namespace, name="curated/sessions"),
        ]
        outputs = [OutputDataset(namespace=w.namespace, name="marts/sessions_by_order")]
        for state in (RunState.START, RunState.COMPLETE):
            client.emit(
                RunEvent(
                    eventType=state,
                    eventTime=datetime.now(UTC).isoformat(),
                    run=Run(runId=self.client_run),
                    job=job,
                    inputs=inputs,
                    outputs=outputs,
                    producer=PRODUCER,
                )
            )
            self.lineage_sent += 1
        say(
            f"  {job.namespace} {job.name}: START + COMPLETE, reads raw/orders (declared) and "
            "curated/sessions (never declared)"
        )

    def _token(self, role: str) -> str:
        return self.keys[role].client.headers["Authorization"].split(" ", 1)[1]

    def lineage_dbt(self) -> None:
        step("Runtime lineage from dbt-ol (dbt on DuckDB; one model reads without ref())")
        workdir = self.stack.var_dir / "dbt"
        bin_dir = dbt.ensure_env(self.dbt_venv)
        dbt.copy_project(workdir, database_file=self.w.duckdb_file)
        dbt.load_warehouse(bin_dir, workdir, database_file=self.w.duckdb_file)
        say(f"  orders loads raw_orders and raw_refunds into {self.w.duckdb_file}")
        self.dbt_emitted = dbt.run_dbt_ol(
            bin_dir,
            workdir,
            url=self.stack.url,
            api_key=self._token("analytics"),
            job_namespace=f"dbt://{self.w.teams['analytics']}",
        )
        self.lineage_sent += self.dbt_emitted

    def lineage_results(self) -> None:
        step("What the catalog learned from lineage")
        w = self.w
        api = self.keys["analytics"]
        refunds = f"{w.duckdb_database}.main.raw_refunds"
        dbt_job = f"{w.duckdb_database}.main.tidemark_demo.refund_rates"

        def undeclared():
            rows = api.all("/api/v1/reports/undeclared-reads")
            names = {(r["dataset"]["name"], (r.get("job") or {}).get("name")) for r in rows}
            want = {("curated/sessions", "sessions_by_order.build"), (refunds, dbt_job)}
            return rows if want <= names else None

        rows = wait_for(
            undeclared, what="the undeclared reads in the governance report", timeout=120
        )
        for row in rows:
            say(
                f"  undeclared read: {row['team']} job {(row.get('job') or {}).get('name')} "
                f"reads {row['dataset']['name']} ({row['runs']} runs)"
            )
        self.report.check(
            "openlineage-python: undeclared read",
            "curated/sessions in the report",
            "listed" if any(r["dataset"]["name"] == "curated/sessions" for r in rows) else "no",
            any(r["dataset"]["name"] == "curated/sessions" for r in rows),
        )
        graph = api.get(
            "/api/v1/lineage/graph",
            params={
                "job_namespace": f"dbt://{w.teams['analytics']}",
                "job_name": dbt_job,
                "direction": "both",
                "depth": 2,
            },
        )
        edges = [
            (e["source"].split(":")[-1], e["direction"], e["target"].split(":")[-1])
            for e in graph["edges"]
        ]
        for source, direction, target in edges:
            say(f"  graph edge: {source} --{direction}--> {target}")
        hidden = any(source == refunds and d == "read" for source, d, _ in edges)
        self.report.check(
            "dbt-ol: hidden read (no ref()) in the graph",
            f"{refunds.split('.', 1)[1]} read by refund_rates",
            f"{len(graph['nodes'])} nodes, {len(edges)} edges; hidden read "
            + ("shown" if hidden else "missing"),
            hidden,
        )
        self.report.check(
            "dbt-ol: hidden read is undeclared",
            "raw_refunds in the report",
            "listed" if any(r["dataset"]["name"] == refunds for r in rows) else "no",
            any(r["dataset"]["name"] == refunds for r in rows),
        )

    # --- figures ---------------------------------------------------------------------------

    def figures(self) -> None:
        step("Figures")
        deliveries = []
        for role in ("analytics", "web"):
            deliveries += self.keys[role].all("/api/v1/deliveries")
        webhook = [d for d in deliveries if "/hooks/" in d["endpoint_url"]]
        states: dict[str, int] = {}
        for d in webhook:
            states[d["state"]] = states.get(d["state"], 0) + 1
        attempts = sum(d["attempts"] for d in webhook)
        self.report.check(
            "every webhook signature verifies",
            "all delivered, 0 rejected",
            f"{len(self.hooks.received)} verified, {len(self.hooks.rejected)} rejected",
            not self.hooks.rejected and states.get("succeeded", 0) == len(webhook) > 0,
        )
        self.report.check(
            "the watchdog's own heartbeat",
            "pings the heartbeat receiver",
            f"{self.heartbeat.pings} heartbeats",
            self.heartbeat.pings >= 1,
        )
        list_calls = pages = sweeps = 0
        for name in ("raw/clicks", "raw/payments"):
            poll = self.keys[self.owner[name]].get(
                f"/api/v1/datasets/{self.datasets[name]['id']}/poll"
            )
            for sweep in poll["recent_sweeps"]:
                if datetime.fromisoformat(sweep["started_at"]) < self.started_at:
                    continue  # a sweep of an earlier run (a configured database)
                sweeps += 1
                list_calls += sweep["list_calls"]
                pages += sweep["pages"]
        ingested, runs = self._lineage_ingested()
        r = self.report
        r.figure("readiness events published", self.published)
        r.figure(
            "webhook deliveries",
            f"{len(webhook)} ({', '.join(f'{v} {k}' for k, v in sorted(states.items()))}) "
            f"in {attempts} attempts",
        )
        r.figure(
            "webhook requests received",
            f"{len(self.hooks.received)} verified ({self.hooks.distinct()} notifications)",
        )
        r.figure(
            "poll sweeps / List calls", f"{sweeps} sweeps, {list_calls} List calls ({pages} pages)"
        )
        r.figure(
            "pages sent / resolved",
            f"{len(self.pagerduty.of('trigger', self.w.routing_key))} triggers / "
            f"{len(self.pagerduty.of('resolve', self.w.routing_key))} resolves",
        )
        incidents = [
            incident
            for monitor in [*self.monitors.values(), self.clicks_monitor]
            for incident in self._watchdog(f"/api/v1/incidents?monitor_id={monitor['id']}")
        ]
        r.figure(
            "watchdog incidents",
            f"{len(incidents)} opened, {sum(1 for i in incidents if i['resolved_at'])} resolved",
        )
        r.figure("watchdog heartbeats", self.heartbeat.pings)
        r.figure(
            "lineage events sent / ingested", f"{self.lineage_sent} / {ingested} ({runs} runs)"
        )
        total_calls = sum(api.calls for api in self.keys.values())
        r.figure("REST calls made by the demo", total_calls)

    def _lineage_ingested(self) -> tuple[int, int]:
        w = self.w
        api = self.keys["analytics"]
        jobs = [
            (f"airflow://{w.teams['analytics']}", "sessions_by_order.build"),
            (f"dbt://{w.teams['analytics']}", "dbt-run-tidemark_demo"),
            (
                f"dbt://{w.teams['analytics']}",
                f"{w.duckdb_database}.main.tidemark_demo.orders_enriched",
            ),
            (
                f"dbt://{w.teams['analytics']}",
                f"{w.duckdb_database}.main.tidemark_demo.refund_rates",
            ),
        ]
        events = runs = 0
        for namespace, name in jobs:
            for run in api.all("/api/v1/lineage/runs", job_namespace=namespace, job_name=name):
                runs += 1
                for event in api.all(f"/api/v1/lineage/runs/{run['run_id']}/events"):
                    events += event["state"] == "processed"
        return events, runs


def _key(day: date) -> str:
    return day.isoformat()


def _poll_reason(part: dict) -> str:
    for holder in (part, part.get("current_revision") or {}):
        metadata = holder.get("metadata") or {}
        poll = metadata.get("poll") or {}
        if poll.get("reason"):
            return poll["reason"]
    return json.dumps(part)[:200]
