"""A typed client generated from the committed docs/openapi.yaml (openapi-python-client)
against the catalog's real web server: the world is built through the client's own create
operations, then every operation of the document is called through its generated function
and each answer must parse into the documented model, with the values served.

A new GET is called without touching this test (one with a new path or required query
parameter needs a value in ``values``: the test says so); a new write fails the write test
until it is called there."""

from __future__ import annotations

import uuid
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from catalog.models import ApiKey, Delivery, DeliveryAttempt, Subscription
from catalog.services.teams import api_key_create
from lineage.services import processing
from tests.api.servers import CatalogServer
from tests.catalog.factories import TeamFactory
from tests.catalog.worker_helpers import free_port, worker_environment
from tests.generated_client import REPOSITORY, GeneratedClient, generate, required_arguments
from tests.lineage import events as ev

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "watchdog"]),
    pytest.mark.timeout(300),
]

DOCUMENT = REPOSITORY / "docs" / "openapi.yaml"
V1 = [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "numeric"}]
DROPPED = [{"name": "id", "type": "bigint"}]
JOB = ("airflow://orders", "orders.rollup")
UNCATALOGUED = ev.dataset("s3://lake", "raw/events")
# Lists the world leaves empty on purpose; every other list must hold rows.
EMPTY_LISTS: set[str] = set()


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> GeneratedClient:
    return generate(DOCUMENT, tmp_path_factory.mktemp("generated"), "tidemark_api_client")


@pytest.fixture
def server(tmp_path, settings):
    env = worker_environment(broker_url=settings.CELERY_BROKER_URL, lease_seconds=60)
    server = CatalogServer(
        name="catalog-web", log_path=tmp_path / "web.log", env=env, port=free_port()
    ).start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def _key(slug: str) -> str:
    team = TeamFactory(slug=slug)
    return api_key_create(team=team, name=slug, scopes=ApiKey.Scope.values)[1]


class World:
    """Teams ``shop`` (producer), ``orders`` (consumer, also governance), ``intruder`` (no
    claims), and what they did through the generated client."""

    def __init__(self, generated: GeneratedClient, url: str) -> None:
        self.g = generated
        self.url = url
        self.shop = generated.client(url, _key("shop"))
        self.orders = generated.client(url, _key("orders"))
        self.intruder = generated.client(url, _key("intruder"))
        self.values: dict[str, object] = {}

    def op(self, operation_id: str):
        [operation] = [o for o in self.g.operations if o.operation_id == operation_id]
        return operation

    def call(self, operation_id: str, client, *args, status: int, **kwargs):
        response = self.g.call(self.op(operation_id), client, *args, **kwargs)
        assert response.status_code == status, (operation_id, response.content[:2000])
        return response.parsed

    def build(self) -> None:
        m = self.g.model
        created = self.call(
            "v1_datasets_create",
            self.shop,
            body=m("DatasetCreateInputRequest")(
                namespace="s3://lake", name="shop/orders", description="Orders, daily"
            ),
            status=201,
        )
        assert (created.name, created.owner, created.description) == (
            "shop/orders",
            "shop",
            "Orders, daily",
        )
        assert created.next_deadline_at is None and created.sunset_at is None  # no SLA
        customers = self.call(
            "v1_datasets_create",
            self.shop,
            body=m("DatasetCreateInputRequest")(namespace="s3://lake", name="shop/customers"),
            status=201,
        )
        claim = self.call(
            "v1_claims_create",
            self.orders,
            body=m("ClaimCreateInputRequest")(pattern=JOB[0]),
            status=201,
        )
        subscription = self.call(
            "v1_subscriptions_create",
            self.orders,
            body=m("SubscriptionCreateInputRequest")(
                dataset_id=created.id, endpoint_url="https://hooks.example.com/orders"
            ),
            status=201,
        )
        # Needed at 07:00 and promised by 09:00: a need-by before the SLA.
        totals = self.call(
            "v1_datasets_create",
            self.shop,
            body=m("DatasetCreateInputRequest").from_dict(
                {
                    "namespace": "s3://lake",
                    "name": "shop/daily_totals",
                    "partitioning": "daily",
                    "sla_cron": "0 9 * * *",
                    "sla_timezone": "UTC",
                }
            ),
            status=201,
        )
        needed = self.call(
            "v1_subscriptions_create",
            self.orders,
            body=m("SubscriptionCreateInputRequest").from_dict(
                {
                    "dataset_id": totals.id,
                    "endpoint_url": "https://hooks.example.com/orders",
                    "need_by_cron": "0 7 * * *",
                    "need_by_timezone": "UTC",
                }
            ),
            status=201,
        )
        assert [w.code for w in needed.warnings] == ["need_by_before_sla"]
        # Declared 40 days ago and never read since: a stale declaration.
        Subscription.objects.filter(pk=subscription.id).update(
            created_at=timezone.now() - timedelta(days=40)
        )
        for partition, fields in (("2026-11-27", V1), ("2026-11-28", DROPPED)):
            published = self.call(
                "v1_readiness_create",
                self.shop,
                body=m("ReadinessPublishInputRequest").from_dict(
                    {
                        "namespace": "s3://lake",
                        "name": "shop/orders",
                        "partition": partition,
                        "metadata": {"schema": {"fields": fields}},
                    }
                ),
                status=201,
            )
        assert published.partition == "2026-11-28"
        notice = self.call(
            "v1_datasets_change_notices_create",
            self.shop,
            created.id,
            body=m("ChangeNoticeCreateInputRequest")(
                kind=m("ChangeNoticeKindEnum")("breaking_schema_change"),
                description="amount is dropped",
                effective_at=timezone.now() + timedelta(days=30),
                require_acknowledgements=True,
            ),
            status=201,
        )
        self.call(
            "v1_datasets_change_notices_acknowledgements_create",
            self.orders,
            created.id,
            notice.id,
            status=201,
        )
        restatement = self.call(
            "v1_datasets_restatements_create",
            self.shop,
            created.id,
            body=m("RestatementOpenInputRequest")(
                version="v2", first_partition="2026-11-28", last_partition="2026-11-28"
            ),
            status=201,
        )
        transfer = self.call(
            "v1_datasets_transfers_create",
            self.shop,
            customers.id,
            body=m("DatasetTransferCreateInputRequest")(to_team="orders"),
            status=201,
        )
        key = self.call(
            "v1_keys_create",
            self.orders,
            body=m("ApiKeyCreateInputRequest")(
                name="reader", scopes=[m("ScopesEnum")("read")], expires_at=None
            ),
            status=201,
        )
        assert key.token.startswith("tm_") and key.expires_at is None
        run_id = self._lineage()
        self.values = {
            "dataset_id": created.id,
            "customers_id": customers.id,
            "notice_id": notice.id,
            "key": "2026-11-28",
            "restatement_id": restatement.id,
            "transfer_id": transfer.id,
            "claim_id": claim.id,
            "subscription_id": subscription.id,
            "public_id": key.public_id,
            "run_id": run_id,
            "type": "partition.ready",
        }

    def _lineage(self) -> str:
        """A run of ``orders``' job reading ``shop/customers`` undeclared and an
        uncatalogued dataset, writing ``shop/customers``; and a forged FAIL of the same run
        from ``intruder``; all processed. Returns the run id."""
        event = self.g.model("OpenLineageEventRequest")
        customers = ev.dataset("s3://lake", "shop/customers")
        run_id = str(uuid.uuid4())
        for client, event_type, minute in (
            (self.orders, "START", 0),
            (self.orders, "COMPLETE", 5),
            (self.intruder, "FAIL", 6),
        ):
            at = (timezone.now() - timedelta(hours=1)).replace(minute=minute, second=0)
            document = ev.run_event(
                event_type,
                run_id=run_id,
                job=JOB,
                event_time=at.isoformat(),
                inputs=[customers, UNCATALOGUED],
                outputs=[customers],
            )
            received = self.call(
                "v1_lineage_create", client, body=event.from_dict(document), status=201
            )
            assert received.run_id == uuid.UUID(run_id)
        processing.lineage_events_process_due()
        return run_id


def test_every_get_of_the_document_parses_into_its_documented_model(generated, server):
    world = World(generated, server.url)
    world.build()
    endpoint_id = world.call("v1_endpoints_list", world.orders, status=200).results[0].id
    delivery_id = world.call("v1_deliveries_list", world.orders, status=200).results[0].id
    # No worker sends here: one failed attempt, as the sender records it, for the log.
    DeliveryAttempt.objects.create(
        delivery=Delivery.objects.get(pk=delivery_id),
        endpoint_id=endpoint_id,
        number=1,
        started_at=timezone.now(),
        duration_ms=12,
        status_code=503,
        decision="retry",
        response_excerpt="upstream unavailable",
        next_attempt_in_seconds=10.0,
    )
    # Path parameters, and query parameters an operation requires.
    values = world.values | {"endpoint_id": endpoint_id, "delivery_id": delivery_id}
    values |= {"job_namespace": JOB[0], "job_name": JOB[1]}
    query_values = {
        "v1_lineage_graph_retrieve": {"namespace": "s3://lake", "name": "shop/customers"}
    }

    called, empty = [], []
    for operation in (o for o in generated.operations if o.method == "GET"):
        module = generated.module(operation)
        # The generator renames a parameter that is a Python name (``type`` -> ``type_``).
        required = {n: n.removesuffix("_") for n in required_arguments(module)}
        missing = [n for n in required.values() if n not in values]
        assert not missing, f"{operation}: add a value for {missing} to values"
        arguments = {n: values[v] for n, v in required.items()}
        arguments |= query_values.get(operation.operation_id, {})
        response = generated.call(operation, world.orders, **arguments)
        assert response.status_code == 200, (str(operation), response.content[:2000])
        results = getattr(response.parsed, "results", None)
        if results is not None and not results:
            empty.append(operation.operation_id)
        called.append(operation.operation_id)
    assert sorted(empty) == sorted(EMPTY_LISTS)
    print(f"\n{len(called)} GET operations of {len(generated.operations)} called")


def test_values_nulls_pages_and_problems_parse_into_typed_objects(generated, server):
    world = World(generated, server.url)
    world.build()
    call = world.call

    first = call("v1_datasets_list", world.orders, page_size=1, status=200)
    assert len(first.results) == 1 and first.previous is None and isinstance(first.next_, str)
    cursor = parse_qs(urlsplit(first.next_).query)["cursor"][0]
    second = call("v1_datasets_list", world.orders, page_size=2, cursor=cursor, status=200)
    assert second.next_ is None and isinstance(second.previous, str)
    names = {d.name for d in first.results + second.results}
    assert names == {"shop/orders", "shop/customers", "shop/daily_totals"}

    [change] = call("v1_reports_unannounced_changes_list", world.orders, status=200).results
    assert (change.removed, change.added, change.source.value) == (["amount"], [], "readiness")
    assert change.job is None and change.run_id is None  # null when told by a publish

    [conflict] = call("v1_reports_run_conflicts_list", world.orders, status=200).results
    assert (conflict.event.team, conflict.event.event_type, conflict.run.team) == (
        "intruder",
        "FAIL",
        "orders",
    )

    refused = call(
        "v1_datasets_create",
        world.shop,
        body=world.g.model("DatasetCreateInputRequest")(
            namespace="s3://lake", name="shop/late", sla_cron="not a cron"
        ),
        status=400,
    )
    assert isinstance(refused, world.g.model("Problem")) and refused.status == 400
    assert [e.field for e in refused.errors] == ["sla_cron"], refused
    missing = call("v1_datasets_retrieve", world.orders, 999999, status=404)
    assert (missing.code, missing.status) == ("dataset_not_found", 404)
    anonymous = generated.client(server.url)
    refused = call("v1_datasets_list", anonymous, status=401)
    assert refused.code == "not_authenticated", refused


def test_every_write_of_the_document_parses_into_its_documented_model(generated, server):
    world = World(generated, server.url)
    world.build()
    m, call, v = generated.model, world.call, world.values
    dataset, notice = v["dataset_id"], v["notice_id"]

    changed = call(
        "v1_datasets_partial_update",
        world.shop,
        dataset,
        body=m("PatchedDatasetUpdateInputRequest")(description="Orders, every day"),
        status=200,
    )
    assert changed.description == "Orders, every day"
    plan = call(
        "v1_catalog_apply_create",
        world.orders,
        body=m("V1CatalogApplyCreateJsonBody").from_dict(
            {"team": "orders", "datasets": [{"namespace": "s3://lake", "name": "orders/x"}]}
        ),
        status=200,
    )
    assert [d.action.value for d in plan.datasets] == ["create"]
    subscription = call(
        "v1_subscriptions_partial_update",
        world.orders,
        v["subscription_id"],
        body=m("PatchedSubscriptionUpdateInputRequest")(newest_only=True),
        status=200,
    )
    assert subscription.newest_only is True
    added = call(
        "v1_subscriptions_endpoints_create",
        world.orders,
        v["subscription_id"],
        body=m("SubscriptionEndpointAddInputRequest")(url="https://backup.example.com/orders"),
        status=201,
    )
    assert added.endpoint_secret.startswith("whsec_") and added.caught_up == 0
    removed = call(
        "v1_subscriptions_endpoints_destroy",
        world.orders,
        v["subscription_id"],
        added.id,
        status=204,
    )
    assert removed is None
    endpoints = call("v1_endpoints_list", world.orders, status=200).results
    [endpoint] = [e.id for e in endpoints if e.url == "https://hooks.example.com/orders"]
    delivery = call("v1_deliveries_list", world.orders, status=200).results[0].id
    rotated = call("v1_endpoints_rotate_secret_create", world.orders, endpoint, status=200)
    assert rotated.endpoint_secret
    call("v1_endpoints_enable_create", world.orders, endpoint, status=200)
    call("v1_endpoints_replay_create", world.orders, endpoint, status=200)
    since = timezone.now() - timedelta(days=1)
    recovered = call(
        "v1_endpoints_recover_create",
        world.orders,
        endpoint,
        body=m("EndpointRecoverInputRequest")(since=since),
        status=200,
    )
    assert recovered.queued == 0  # nothing failed yet
    paced = call(
        "v1_endpoints_partial_update",
        world.orders,
        endpoint,
        body=m("PatchedEndpointUpdateInputRequest")(rate_limit_per_second=2),
        status=200,
    )
    assert paced.rate_limit_per_second == 2 and paced.throttled_until is None
    # Still pending (no worker here): replaying it is refused, as a typed problem.
    refused = call("v1_deliveries_replay_create", world.orders, delivery, status=409)
    assert refused.code == "not_a_dead_letter"
    applied = call(
        "v1_datasets_change_notices_apply_early_create", world.shop, dataset, notice, status=200
    )
    assert applied.id == notice
    restated = m("ReadinessPublishInputRequest")(
        namespace="s3://lake",
        name="shop/orders",
        partition="2026-11-28",
        version="v2",
        restatement=v["restatement_id"],
    )
    call("v1_readiness_create", world.shop, body=restated, status=201)
    promoted = call(
        "v1_datasets_restatements_promote_create",
        world.shop,
        dataset,
        v["restatement_id"],
        status=200,
    )
    assert promoted.state.value == "promoted"
    accepted = call(
        "v1_datasets_transfers_accept_create",
        world.orders,
        world.values["customers_id"],
        v["transfer_id"],
        status=200,
    )
    assert accepted.state.value == "accepted"
    opened = call(
        "v1_datasets_restatements_create",
        world.shop,
        dataset,
        body=m("RestatementOpenInputRequest")(
            version="v3", first_partition="2026-11-27", last_partition="2026-11-27"
        ),
        status=201,
    )
    abandoned = call(
        "v1_datasets_restatements_abandon_create", world.shop, dataset, opened.id, status=200
    )
    assert abandoned.state.value == "abandoned"
    offered = call(
        "v1_datasets_transfers_create",
        world.shop,
        dataset,
        body=m("DatasetTransferCreateInputRequest")(to_team="intruder"),
        status=201,
    )
    cancelled = call(
        "v1_datasets_transfers_cancel_create", world.shop, dataset, offered.id, status=200
    )
    assert cancelled.state.value == "cancelled"
    assert call("v1_keys_destroy", world.orders, v["public_id"], status=204) is None
    assert call("v1_claims_destroy", world.orders, v["claim_id"], status=204) is None
    assert call("v1_subscriptions_destroy", world.orders, v["subscription_id"], status=204) is None
    writes = {o.operation_id for o in generated.operations if o.method != "GET"}
    assert writes <= generated.called, f"not called: {sorted(writes - generated.called)}"
    print(f"\n{len(generated.called)} of {len(generated.operations)} operations called")
