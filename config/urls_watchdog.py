"""URLs of the watchdog's own server: pings, its REST API, a health check and the on-call
pages. Errors Django answers itself (no route, a bad Host) are problem documents too."""

from django.urls import include, path

urlpatterns = [
    path("", include("watchdog.urls")),
    path("oncall/", include("watchdog.urls_oncall")),
]

handler400 = "httpkit.exceptions.bad_request"
handler404 = "httpkit.exceptions.not_found"
handler500 = "httpkit.exceptions.server_error"
