from django.apps import AppConfig


class LineageConfig(AppConfig):
    name = "lineage"
    default_auto_field = "django.db.models.BigAutoField"
