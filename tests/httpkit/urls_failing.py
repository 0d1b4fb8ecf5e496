"""The catalog's URLs plus one whose view raises, for the tests of what a 500 logs and
answers."""

from django.urls import path

from config.urls import handler400, handler404, handler500
from config.urls import urlpatterns as catalog_urlpatterns

__all__ = ["handler400", "handler404", "handler500", "urlpatterns"]


def fail(request):
    return 1 / 0


urlpatterns = [path("fail", fail), *catalog_urlpatterns]
