from django.urls import path, re_path

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
)

urlpatterns = [
    path("me", catalog.MeApi.as_view(), name="me"),
    path("keys", catalog.ApiKeyListCreateApi.as_view(), name="key-list"),
    path("keys/<str:public_id>", catalog.ApiKeyRevokeApi.as_view(), name="key-revoke"),
    path("datasets", catalog.DatasetListCreateApi.as_view(), name="dataset-list"),
    path("catalog/apply", catalog.CatalogApplyApi.as_view(), name="catalog-apply"),
    path("datasets/<int:dataset_id>", catalog.DatasetDetailApi.as_view(), name="dataset-detail"),
    path(
        "datasets/<int:dataset_id>/audit", catalog.DatasetAuditApi.as_view(), name="dataset-audit"
    ),
    path(
        "datasets/<int:dataset_id>/freshness",
        catalog.DatasetFreshnessApi.as_view(),
        name="dataset-freshness",
    ),
    path("datasets/<int:dataset_id>/poll", catalog.DatasetPollApi.as_view(), name="dataset-poll"),
    path(
        "datasets/<int:dataset_id>/partitions",
        catalog.PartitionListApi.as_view(),
        name="partition-list",
    ),
    path(
        "datasets/<int:dataset_id>/partitions/latest",
        catalog.PartitionLatestReadyApi.as_view(),
        name="partition-latest",
    ),
    path(
        "datasets/<int:dataset_id>/partitions/<str:key>",
        catalog.PartitionDetailApi.as_view(),
        name="partition-detail",
    ),
    path(
        "datasets/<int:dataset_id>/schema-observations",
        schemas.DatasetSchemaObservationListApi.as_view(),
        name="dataset-schema-observations",
    ),
    path(
        "datasets/<int:dataset_id>/change-notices",
        change_notices.ChangeNoticeListCreateApi.as_view(),
        name="change-notice-list",
    ),
    path(
        "datasets/<int:dataset_id>/change-notices/<int:notice_id>",
        change_notices.ChangeNoticeDetailApi.as_view(),
        name="change-notice-detail",
    ),
    path(
        "datasets/<int:dataset_id>/change-notices/<int:notice_id>/acknowledgements",
        change_notices.ChangeNoticeAcknowledgementListCreateApi.as_view(),
        name="change-notice-acknowledgements",
    ),
    path(
        "datasets/<int:dataset_id>/change-notices/<int:notice_id>/apply-early",
        change_notices.ChangeNoticeApplyEarlyApi.as_view(),
        name="change-notice-apply-early",
    ),
    path(
        "datasets/<int:dataset_id>/restatements",
        restatements.RestatementListCreateApi.as_view(),
        name="restatement-list",
    ),
    path(
        "datasets/<int:dataset_id>/restatements/<int:restatement_id>",
        restatements.RestatementDetailApi.as_view(),
        name="restatement-detail",
    ),
    path(
        "datasets/<int:dataset_id>/restatements/<int:restatement_id>/promote",
        restatements.RestatementPromoteApi.as_view(),
        name="restatement-promote",
    ),
    path(
        "datasets/<int:dataset_id>/restatements/<int:restatement_id>/abandon",
        restatements.RestatementAbandonApi.as_view(),
        name="restatement-abandon",
    ),
    path("readiness", readiness.readiness_publish_view, name="readiness-publish"),
    path("event-types", event_types.EventTypeListApi.as_view(), name="event-type-list"),
    path(
        "event-types/<str:type>", event_types.EventTypeDetailApi.as_view(), name="event-type-detail"
    ),
    path("endpoints", delivery.EndpointListApi.as_view(), name="endpoint-list"),
    path(
        "endpoints/<int:endpoint_id>/rotate-secret",
        delivery.EndpointRotateSecretApi.as_view(),
        name="endpoint-rotate-secret",
    ),
    path(
        "endpoints/<int:endpoint_id>/enable",
        delivery.EndpointEnableApi.as_view(),
        name="endpoint-enable",
    ),
    path(
        "endpoints/<int:endpoint_id>/replay",
        delivery.EndpointReplayApi.as_view(),
        name="endpoint-replay",
    ),
    path("deliveries", delivery.DeliveryListApi.as_view(), name="delivery-list"),
    path(
        "deliveries/<int:delivery_id>",
        delivery.DeliveryDetailApi.as_view(),
        name="delivery-detail",
    ),
    path(
        "deliveries/<int:delivery_id>/replay",
        delivery.DeliveryReplayApi.as_view(),
        name="delivery-replay",
    ),
    path("subscriptions", catalog.SubscriptionListCreateApi.as_view(), name="subscription-list"),
    path(
        "subscriptions/<int:subscription_id>",
        catalog.SubscriptionDetailApi.as_view(),
        name="subscription-detail",
    ),
    path(
        "datasets/<int:dataset_id>/transfers",
        governance.DatasetTransferCreateApi.as_view(),
        name="dataset-transfer-list",
    ),
    path(
        "datasets/<int:dataset_id>/transfers/<int:transfer_id>/accept",
        governance.DatasetTransferAcceptApi.as_view(),
        name="dataset-transfer-accept",
    ),
    path(
        "datasets/<int:dataset_id>/transfers/<int:transfer_id>/cancel",
        governance.DatasetTransferCancelApi.as_view(),
        name="dataset-transfer-cancel",
    ),
    path(
        "ownership-transfers",
        governance.DatasetTransferListApi.as_view(),
        name="ownership-transfer-list",
    ),
    path("claims", governance.ClaimListCreateApi.as_view(), name="claim-list"),
    path("claims/<int:claim_id>", governance.ClaimDeleteApi.as_view(), name="claim-delete"),
    path(
        "reports/undeclared-reads",
        governance.UndeclaredReadsReportApi.as_view(),
        name="report-undeclared-reads",
    ),
    path(
        "reports/undeclared-writes",
        governance.UndeclaredWritesReportApi.as_view(),
        name="report-undeclared-writes",
    ),
    path(
        "reports/stale-declarations",
        governance.StaleDeclarationsReportApi.as_view(),
        name="report-stale-declarations",
    ),
    path(
        "reports/uncatalogued-datasets",
        governance.UncataloguedDatasetsReportApi.as_view(),
        name="report-uncatalogued-datasets",
    ),
    path(
        "reports/unannounced-changes",
        governance.UnannouncedChangesReportApi.as_view(),
        name="report-unannounced-changes",
    ),
    path(
        "reports/run-conflicts",
        governance.RunConflictsReportApi.as_view(),
        name="report-run-conflicts",
    ),
    path(
        "reports/needed-earlier",
        governance.NeededEarlierReportApi.as_view(),
        name="report-needed-earlier",
    ),
    # POST: the OpenLineage endpoint; GET: Marquez's lineage graph (api.views.marquez).
    path("lineage", lineage.LineageEventReceiveApi.as_view(), name="lineage-receive"),
    path("lineage/graph", lineage.LineageGraphApi.as_view(), name="lineage-graph"),
    path("lineage/runs", lineage.RunListApi.as_view(), name="lineage-run-list"),
    path(
        "lineage/runs/<uuid:run_id>/events",
        lineage.RunEventListApi.as_view(),
        name="lineage-run-events",
    ),
    # Marquez's read API (paths as Marquez serves them; api.views.marquez).
    path("namespaces", marquez.MarquezNamespaceListApi.as_view(), name="marquez-namespace-list"),
    re_path(
        r"^namespaces/(?P<rest>.+)$",
        marquez.MarquezNamespacePathApi.as_view(),
        name="marquez-namespace-path",
    ),
    path("jobs", marquez.MarquezJobListApi.as_view(), name="marquez-job-list"),
    path("jobs/runs/<uuid:run_id>", marquez.MarquezRunApi.as_view(), name="marquez-run"),
    path(
        "jobs/runs/<uuid:run_id>/facets",
        marquez.MarquezRunFacetsApi.as_view(),
        name="marquez-run-facets",
    ),
    path(
        "column-lineage",
        marquez.MarquezColumnLineageApi.as_view(),
        name="marquez-column-lineage",
    ),
    path("search", marquez.MarquezSearchApi.as_view(), name="marquez-search"),
]
