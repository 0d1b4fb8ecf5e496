"""URLs of the watchdog's own server: pings, its REST API and a health check."""

from django.urls import include, path

urlpatterns = [path("", include("watchdog.urls"))]
