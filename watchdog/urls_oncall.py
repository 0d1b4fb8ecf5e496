"""The on-call pages, mounted at ``/oncall/`` by the main deployment (``config.urls``) and
by the watchdog deployed alone (``config.urls_watchdog``)."""

from django.urls import path

from . import oncall

app_name = "oncall"

urlpatterns = [
    path("", oncall.monitor_list, name="monitor-list"),
    path("login", oncall.login, name="login"),
    path("logout", oncall.logout, name="logout"),
    path("monitors/<int:monitor_id>", oncall.monitor_detail, name="monitor-detail"),
    path("monitors/<int:monitor_id>/pause", oncall.monitor_pause, name="monitor-pause"),
    path("monitors/<int:monitor_id>/resume", oncall.monitor_resume, name="monitor-resume"),
    path("incidents", oncall.incident_list, name="incident-list"),
]
