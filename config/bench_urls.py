"""URLs for ``config.settings.bench``: every product route plus the framework floor view."""

from django.urls import path

from bench.floor import floor, readiness_through_drf
from config.urls import handler404, handler500
from config.urls import urlpatterns as product_urlpatterns

urlpatterns = [
    *product_urlpatterns,
    path("bench/floor", floor, name="bench-floor"),
    path("bench/readiness-drf", readiness_through_drf, name="bench-readiness-drf"),
]

__all__ = ["handler404", "handler500", "urlpatterns"]
