"""The catalog's and the watchdog's URLs in one server, for in-process tests of the feed
between them (in production they are separate servers), with the catalog's error
handlers."""

from config.urls import handler400, handler404, handler500  # noqa: F401
from config.urls import urlpatterns as catalog_patterns
from config.urls_watchdog import urlpatterns as watchdog_patterns

urlpatterns = [*catalog_patterns, *watchdog_patterns]
