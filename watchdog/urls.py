"""The watchdog's URLs: ping endpoints and its REST API."""

from django.urls import path, register_converter

from . import api, views


class ExitStatus:
    regex = "[0-9]{1,3}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(ExitStatus, "exit")

urlpatterns = [
    path("ping/<uuid:key>", views.ping_success, name="ping"),
    path("ping/<uuid:key>/start", views.ping_start, name="ping-start"),
    path("ping/<uuid:key>/fail", views.ping_fail, name="ping-fail"),
    path("ping/<uuid:key>/<exit:status>", views.ping_exit_status, name="ping-exit"),
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
    path("healthz", views.healthz, name="watchdog-healthz"),
    path("readyz", views.readyz, name="watchdog-readyz"),
]
