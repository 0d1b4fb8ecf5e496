"""URLs of the watchdog's own server: pings, its REST API and its OpenAPI document with a
docs page, a health check, the on-call pages and their stylesheet and favicon. Errors
Django answers itself (no route, a bad Host) are problem documents too."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from httpkit import problem_types
from watchdog.openapi import SPECTACULAR_SETTINGS

# The document describes this URLconf whatever the server's ROOT_URLCONF (the suite's is
# the catalog's); it needs no token.
_PUBLIC = {"authentication_classes": [], "permission_classes": [AllowAny]}

urlpatterns = [
    path("", include("watchdog.urls")),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(
            urlconf="config.urls_watchdog", custom_settings=SPECTACULAR_SETTINGS, **_PUBLIC
        ),
        name="watchdog-schema",
    ),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(
            url_name="watchdog-schema", title=SPECTACULAR_SETTINGS["TITLE"], **_PUBLIC
        ),
        name="watchdog-api-docs",
    ),
    path("problems/", problem_types.problem_type_list, name="problem-types"),
    path("problems/<slug:slug>", problem_types.problem_type_detail, name="problem-type"),
    path("oncall/", include("watchdog.urls_oncall")),
    path("", include("httpkit.urls")),  # the pages' stylesheet and favicon
]

handler400 = "httpkit.exceptions.bad_request"
handler404 = "httpkit.exceptions.not_found"
handler500 = "httpkit.exceptions.server_error"
