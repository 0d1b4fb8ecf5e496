"""Routes listed as a table: the API URLconfs (the catalog's ``api.urls`` and the
watchdog's) name each resource's path once and its operations as rows under it."""

from django.urls import URLPattern, path


def routes_under(prefix: str, *routes: tuple[str, type, str]) -> list[URLPattern]:
    """One route ``prefix + suffix`` to ``view.as_view()`` named ``name`` for each
    ``(suffix, view, name)`` row, in the order given (the resolving order); ``view`` is an
    APIView class."""
    return [path(prefix + suffix, view.as_view(), name=name) for suffix, view, name in routes]
