"""The catalog's and the watchdog's URLs in one server, for in-process tests of the feed
between them (in production they are separate servers)."""

from config.urls import urlpatterns as catalog_patterns
from config.urls_watchdog import urlpatterns as watchdog_patterns

urlpatterns = [*catalog_patterns, *watchdog_patterns]
