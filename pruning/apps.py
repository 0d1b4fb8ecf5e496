from django.apps import AppConfig


class PruningConfig(AppConfig):
    name = "pruning"
    verbose_name = "retention (pruning)"
