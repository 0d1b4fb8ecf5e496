from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from api.views import badge, errors, health
from catalog import metrics
from catalog.web.urls import auth_urlpatterns
from httpkit import problem_types

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("badge/<str:token>.svg", badge.freshness_badge, name="freshness-badge"),
    path("api/v1/", include("api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    path("problems/", problem_types.problem_type_list, name="problem-types"),
    path("problems/<slug:slug>", problem_types.problem_type_detail, name="problem-type"),
    path("oncall/", include("watchdog.urls_oncall")),
    path("", include("httpkit.urls")),
    *auth_urlpatterns,
    path("", include("catalog.web.urls")),
]

if settings.EMBEDDED:
    from api.views import demo

    urlpatterns.append(path("demo/hooks/<slug:team_slug>", demo.webhook_receiver))

handler400 = errors.bad_request
handler404 = errors.not_found
handler500 = errors.server_error
