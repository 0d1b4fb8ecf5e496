"""URLs for ``config.settings.bench``: every product route plus the framework floor view."""

from django.urls import path

from bench.floor import floor
from config.urls import handler404, handler500
from config.urls import urlpatterns as product_urlpatterns

urlpatterns = [
    *product_urlpatterns,
    path("bench/floor", floor, name="bench-floor"),
]

__all__ = ["handler404", "handler500", "urlpatterns"]
