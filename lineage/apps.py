from django.apps import AppConfig


class LineageConfig(AppConfig):
    name = "lineage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Tidemark watching itself measures the lineage queue's lag too; the catalog never
        # imports lineage, so lineage hands the measure over.
        from catalog import metrics, self_monitoring

        from . import metrics as lineage_metrics
        from . import selectors

        self_monitoring.register_lag(
            self_monitoring.Lag(
                external_id="tidemark:system:lineage",
                name="Tidemark lineage processing",
                threshold="lineage_lag_seconds",
                measure=selectors.event_lag,
            )
        )
        # Its backlog is on the catalog's /metrics, which cannot import lineage either.
        metrics.register_state(lineage_metrics.backlog)
