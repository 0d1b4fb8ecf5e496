"""The watchdog's URLs: ping endpoints and its REST API."""

from django.urls import include, path, register_converter

from httpkit.routes import routes_under

from . import metrics, views
from .api import external as api_external
from .api import ping_keys as api_ping_keys
from .api import views as api


class ExitStatus:
    # Any number, as the convention's: one over 255 is answered 400 by the view.
    regex = "[0-9]{1,9}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(ExitStatus, "exit")


# The suffixes of a ping URL, after ``/ping/<uuid>`` or ``/ping/<ping key>/<slug>``.
def _suffixes(view, prefix: str) -> list:
    return [
        path("start", view, {"action": "start"}, name=f"{prefix}-start"),
        path("fail", view, {"action": "fail"}, name=f"{prefix}-fail"),
        path("log", view, {"action": "log"}, name=f"{prefix}-log"),
        path("<exit:status>", view, name=f"{prefix}-exit"),
    ]


urlpatterns = [
    path("ping/<uuid:key>", views.ping, name="ping"),
    path("ping/<uuid:key>/", include(_suffixes(views.ping, "ping"))),
    # A UUID's suffixes come first: a ping key is never UUID-shaped.
    path("ping/<slug:ping_key>/<slug:slug>", views.ping_by_slug, name="ping-slug"),
    path("ping/<slug:ping_key>/<slug:slug>/", include(_suffixes(views.ping_by_slug, "ping-slug"))),
    *routes_under(
        "api/v1/",
        ("monitors", api.MonitorListCreateApi, "monitor-list"),
        ("monitors/<int:monitor_id>", api.MonitorDetailApi, "monitor-detail"),
        ("monitors/<int:monitor_id>/pause", api.MonitorPauseApi, "monitor-pause"),
        ("monitors/<int:monitor_id>/resume", api.MonitorResumeApi, "monitor-resume"),
        (
            "monitors/external/<str:external_id>",
            api_external.ExternalMonitorApi,
            "monitor-external",
        ),
        (
            "monitors/external/<str:external_id>/ping",
            api_external.ExternalPingApi,
            "monitor-external-ping",
        ),
        ("channels", api.ChannelListCreateApi, "channel-list"),
        ("incidents", api.IncidentListApi, "incident-list"),
        ("ping-keys", api_ping_keys.PingKeyListCreateApi, "ping-key-list"),
        ("ping-keys/<int:key_id>", api_ping_keys.PingKeyDetailApi, "ping-key-detail"),
    ),
    path("healthz", views.healthz, name="watchdog-healthz"),
    path("readyz", views.readyz, name="watchdog-readyz"),
    path("metrics", metrics.metrics_view, name="watchdog-metrics"),
]
