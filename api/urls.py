"""The API's routes (mounted at ``/api/v1/``). Routes under one resource are listed as
``(suffix, view, name)`` rows under its path; the order is the resolving order."""

from django.urls import path, re_path

from httpkit.routes import routes_under

from .views import (
    catalog,
    change_notices,
    delivery,
    event_types,
    governance,
    lineage,
    marquez,
    readiness,
    restatements,
    schemas,
    subscription_endpoints,
)

DATASET = "datasets/<int:dataset_id>"
NOTICE = f"{DATASET}/change-notices/<int:notice_id>"
RESTATEMENT = f"{DATASET}/restatements/<int:restatement_id>"
TRANSFER = f"{DATASET}/transfers/<int:transfer_id>"

# Governance reports: ``reports/<slug>`` named ``report-<slug>``.
REPORTS = [
    ("undeclared-reads", governance.UndeclaredReadsReportApi),
    ("undeclared-writes", governance.UndeclaredWritesReportApi),
    ("stale-declarations", governance.StaleDeclarationsReportApi),
    ("uncatalogued-datasets", governance.UncataloguedDatasetsReportApi),
    ("unannounced-changes", governance.UnannouncedChangesReportApi),
    ("run-conflicts", governance.RunConflictsReportApi),
    ("needed-earlier", governance.NeededEarlierReportApi),
]

urlpatterns = [
    *routes_under(
        "",
        ("me", catalog.MeApi, "me"),
        ("keys", catalog.ApiKeyListCreateApi, "key-list"),
        ("keys/<str:public_id>", catalog.ApiKeyRevokeApi, "key-revoke"),
        ("datasets", catalog.DatasetListCreateApi, "dataset-list"),
        ("catalog/apply", catalog.CatalogApplyApi, "catalog-apply"),
    ),
    *routes_under(
        DATASET,
        ("", catalog.DatasetDetailApi, "dataset-detail"),
        ("/audit", catalog.DatasetAuditApi, "dataset-audit"),
        ("/freshness", catalog.DatasetFreshnessApi, "dataset-freshness"),
        ("/poll", catalog.DatasetPollApi, "dataset-poll"),
        ("/partitions", catalog.PartitionListApi, "partition-list"),
        ("/partitions/latest", catalog.PartitionLatestReadyApi, "partition-latest"),
        ("/partitions/<str:key>", catalog.PartitionDetailApi, "partition-detail"),
        (
            "/schema-observations",
            schemas.DatasetSchemaObservationListApi,
            "dataset-schema-observations",
        ),
        ("/change-notices", change_notices.ChangeNoticeListCreateApi, "change-notice-list"),
    ),
    *routes_under(
        NOTICE,
        ("", change_notices.ChangeNoticeDetailApi, "change-notice-detail"),
        (
            "/acknowledgements",
            change_notices.ChangeNoticeAcknowledgementListCreateApi,
            "change-notice-acknowledgements",
        ),
        ("/apply-early", change_notices.ChangeNoticeApplyEarlyApi, "change-notice-apply-early"),
    ),
    *routes_under(
        DATASET, ("/restatements", restatements.RestatementListCreateApi, "restatement-list")
    ),
    *routes_under(
        RESTATEMENT,
        ("", restatements.RestatementDetailApi, "restatement-detail"),
        ("/promote", restatements.RestatementPromoteApi, "restatement-promote"),
        ("/abandon", restatements.RestatementAbandonApi, "restatement-abandon"),
    ),
    path("readiness", readiness.readiness_publish_view, name="readiness-publish"),
    *routes_under(
        "",
        ("event-types", event_types.EventTypeListApi, "event-type-list"),
        ("event-types/<str:type>", event_types.EventTypeDetailApi, "event-type-detail"),
        ("endpoints", delivery.EndpointListApi, "endpoint-list"),
    ),
    *routes_under(
        "endpoints/<int:endpoint_id>",
        ("", delivery.EndpointDetailApi, "endpoint-detail"),
        ("/rotate-secret", delivery.EndpointRotateSecretApi, "endpoint-rotate-secret"),
        ("/enable", delivery.EndpointEnableApi, "endpoint-enable"),
        ("/replay", delivery.EndpointReplayApi, "endpoint-replay"),
        ("/recover", delivery.EndpointRecoverApi, "endpoint-recover"),
        ("/attempts", delivery.EndpointAttemptListApi, "endpoint-attempts"),
    ),
    *routes_under(
        "deliveries",
        ("", delivery.DeliveryListApi, "delivery-list"),
        ("/<int:delivery_id>", delivery.DeliveryDetailApi, "delivery-detail"),
        ("/<int:delivery_id>/replay", delivery.DeliveryReplayApi, "delivery-replay"),
    ),
    *routes_under(
        "subscriptions",
        ("", catalog.SubscriptionListCreateApi, "subscription-list"),
        ("/<int:subscription_id>", catalog.SubscriptionDetailApi, "subscription-detail"),
        (
            "/<int:subscription_id>/endpoints",
            subscription_endpoints.SubscriptionEndpointAddApi,
            "subscription-endpoint-list",
        ),
        (
            "/<int:subscription_id>/endpoints/<int:endpoint_id>",
            subscription_endpoints.SubscriptionEndpointRemoveApi,
            "subscription-endpoint-detail",
        ),
    ),
    *routes_under(
        DATASET, ("/transfers", governance.DatasetTransferCreateApi, "dataset-transfer-list")
    ),
    *routes_under(
        TRANSFER,
        ("/accept", governance.DatasetTransferAcceptApi, "dataset-transfer-accept"),
        ("/cancel", governance.DatasetTransferCancelApi, "dataset-transfer-cancel"),
    ),
    *routes_under(
        "",
        ("ownership-transfers", governance.DatasetTransferListApi, "ownership-transfer-list"),
        ("claims", governance.ClaimListCreateApi, "claim-list"),
        ("claims/<int:claim_id>", governance.ClaimDeleteApi, "claim-delete"),
    ),
    *(path(f"reports/{slug}", view.as_view(), name=f"report-{slug}") for slug, view in REPORTS),
    # POST: the OpenLineage endpoint; GET: Marquez's lineage graph (api.views.marquez).
    *routes_under(
        "lineage",
        ("", lineage.LineageEventReceiveApi, "lineage-receive"),
        ("/graph", lineage.LineageGraphApi, "lineage-graph"),
        ("/runs", lineage.RunListApi, "lineage-run-list"),
        ("/runs/<uuid:run_id>/events", lineage.RunEventListApi, "lineage-run-events"),
    ),
    # Marquez's read API (paths as Marquez serves them; api.views.marquez).
    path("namespaces", marquez.MarquezNamespaceListApi.as_view(), name="marquez-namespace-list"),
    re_path(
        r"^namespaces/(?P<rest>.+)$",
        marquez.MarquezNamespacePathApi.as_view(),
        name="marquez-namespace-path",
    ),
    *routes_under(
        "",
        ("jobs", marquez.MarquezJobListApi, "marquez-job-list"),
        ("jobs/runs/<uuid:run_id>", marquez.MarquezRunApi, "marquez-run"),
        ("jobs/runs/<uuid:run_id>/facets", marquez.MarquezRunFacetsApi, "marquez-run-facets"),
        ("column-lineage", marquez.MarquezColumnLineageApi, "marquez-column-lineage"),
        ("search", marquez.MarquezSearchApi, "marquez-search"),
    ),
]
