"""URLs of the watchdog's own server: pings, its REST API, a health check, the on-call
pages and their stylesheet and favicon. Errors Django answers itself (no route, a bad
Host) are problem documents too."""

from django.urls import include, path

from httpkit import problem_types

urlpatterns = [
    path("", include("watchdog.urls")),
    path("problems/", problem_types.problem_type_list, name="problem-types"),
    path("problems/<slug:slug>", problem_types.problem_type_detail, name="problem-type"),
    path("oncall/", include("watchdog.urls_oncall")),
    path("", include("httpkit.urls")),  # the pages' stylesheet and favicon
]

handler400 = "httpkit.exceptions.bad_request"
handler404 = "httpkit.exceptions.not_found"
handler500 = "httpkit.exceptions.server_error"
