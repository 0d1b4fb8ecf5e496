from django.apps import AppConfig


class WatchdogConfig(AppConfig):
    name = "watchdog"
    default_auto_field = "django.db.models.BigAutoField"
