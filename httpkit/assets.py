"""The pages' shared look, served the same by the catalog and by the watchdog deployed
alone: the stylesheet and the favicon (SVG, and an ICO for ``/favicon.ico``), files in
``httpkit/assets/``.

A view serves them rather than the static files app: the watchdog alone has no static
files app, no ``collectstatic`` step and no WhiteNoise, and its pages must keep their look
when everything else is down. Each file is read once per process (on every request with
``DEBUG``, so an edited stylesheet shows at once) and answered with a strong ``ETag`` of
its content; ``asset_url`` adds that digest to the URL, and a request naming the current
digest is cached for a year as immutable, so a release's new stylesheet is fetched at once
and an unchanged one never again.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.urls import reverse
from django.utils.http import parse_etags
from django.views.decorators.http import require_safe

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
CONTENT_TYPES = {
    "tidemark.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
    "favicon.ico": "image/vnd.microsoft.icon",
}
_NAMES = {name: name for name in CONTENT_TYPES}
# A URL naming the content's digest never changes meaning: cache it a year (seconds).
IMMUTABLE_MAX_AGE = 365 * 86400
# Anything else (the root favicon, an outdated digest): an hour, then revalidated.
MAX_AGE = 3600


@dataclass(frozen=True)
class Asset:
    """One served file: its bytes, content type and ``digest`` (the first 12 hex digits
    of its SHA-256, which is also its ETag)."""

    body: bytes
    content_type: str
    digest: str


def _read(name: str) -> Asset:
    body = (ASSETS_DIR / name).read_bytes()
    return Asset(body, CONTENT_TYPES[name], hashlib.sha256(body).hexdigest()[:12])


_cached = functools.cache(_read)


def asset(name: str) -> Asset:
    """The asset ``name`` (a key of ``CONTENT_TYPES``).

    Raises:
        KeyError: ``name`` is not one of the assets.
    """
    name = _NAMES[name]  # the plain string (a template passes a SafeString)
    return _read(name) if settings.DEBUG else _cached(name)


def asset_url(name: str) -> str:
    """The URL of asset ``name`` with its digest (``/assets/tidemark.css?v=1a2b3c4d5e6f``),
    cached by browsers until the file changes.

    Raises:
        KeyError: ``name`` is not one of the assets.
    """
    return f"{reverse('asset', args=[name])}?v={asset(name).digest}"


@require_safe
def serve(request: HttpRequest, name: str) -> HttpResponse:
    """GET or HEAD an asset: 200 with its bytes, 304 when ``If-None-Match`` names its
    ETag, 404 for a name that is not an asset."""
    try:
        found = asset(name)
    except KeyError:
        raise Http404(f"no asset {name!r}") from None
    etag = f'"{found.digest}"'
    current = request.GET.get("v") == found.digest
    cache = (
        f"public, max-age={IMMUTABLE_MAX_AGE}, immutable"
        if current
        else f"public, max-age={MAX_AGE}"
    )
    if etag in parse_etags(request.headers.get("If-None-Match", "")):
        response = HttpResponseNotModified()
    else:
        response = HttpResponse(found.body, content_type=found.content_type)
    response["ETag"] = etag
    response["Cache-Control"] = cache
    response["X-Content-Type-Options"] = "nosniff"
    return response
