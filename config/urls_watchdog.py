"""URLs of the watchdog's own server: pings, its REST API, a health check and the on-call
pages."""

from django.urls import include, path

urlpatterns = [
    path("", include("watchdog.urls")),
    path("oncall/", include("watchdog.urls_oncall")),
]
