"""The watchdog's URLs: ping endpoints and its REST API."""

from django.urls import include, path, register_converter

from . import api, api_ping_keys, metrics, views


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
    path("api/v1/monitors", api.MonitorListCreateApi.as_view(), name="monitor-list"),
    path("api/v1/monitors/<int:monitor_id>", api.MonitorDetailApi.as_view(), name="monitor-detail"),
    path(
        "api/v1/monitors/<int:monitor_id>/pause",
        api.MonitorPauseApi.as_view(),
        name="monitor-pause",
    ),
    path(
        "api/v1/monitors/<int:monitor_id>/resume",
        api.MonitorResumeApi.as_view(),
        name="monitor-resume",
    ),
    path(
        "api/v1/monitors/external/<str:external_id>",
        api.ExternalMonitorApi.as_view(),
        name="monitor-external",
    ),
    path(
        "api/v1/monitors/external/<str:external_id>/ping",
        api.ExternalPingApi.as_view(),
        name="monitor-external-ping",
    ),
    path("api/v1/channels", api.ChannelListCreateApi.as_view(), name="channel-list"),
    path("api/v1/incidents", api.IncidentListApi.as_view(), name="incident-list"),
    path("api/v1/ping-keys", api_ping_keys.PingKeyListCreateApi.as_view(), name="ping-key-list"),
    path(
        "api/v1/ping-keys/<int:key_id>",
        api_ping_keys.PingKeyDetailApi.as_view(),
        name="ping-key-detail",
    ),
    path("healthz", views.healthz, name="watchdog-healthz"),
    path("readyz", views.readyz, name="watchdog-readyz"),
    path("metrics", metrics.metrics_view, name="watchdog-metrics"),
]
