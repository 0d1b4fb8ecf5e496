"""The pages' shared stylesheet and favicon (``httpkit.assets``), served by the catalog and by
the watchdog's own URLconf alike, and linked from both layouts."""

from __future__ import annotations

import struct

import pytest
from django.test import Client

from httpkit import assets

pytestmark = pytest.mark.django_db(databases="__all__")

URLCONFS = ["config.urls", "config.urls_watchdog"]


@pytest.fixture(params=URLCONFS)
def client(request, settings) -> Client:
    settings.ROOT_URLCONF = request.param
    return Client()


def test_the_favicon_ico_is_an_icon_not_a_404(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/vnd.microsoft.icon"
    body = response.content
    reserved, kind, count = struct.unpack("<HHH", body[:6])
    assert (reserved, kind) == (0, 1) and count >= 2  # an ICO with several sizes
    sizes = set()
    for n in range(count):
        width, _, _, _, _, _, length, offset = struct.unpack(
            "<BBBBHHII", body[6 + 16 * n : 22 + 16 * n]
        )
        assert body[offset : offset + 8] == b"\x89PNG\r\n\x1a\n" and offset + length <= len(body)
        sizes.add(width)
    assert {16, 32} <= sizes


def test_the_svg_favicon_and_the_stylesheet(client):
    icon = client.get("/favicon.svg")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg") and b'viewBox="0 0 32 32"' in icon.content
    css = client.get("/assets/tidemark.css")
    assert css.status_code == 200 and css["Content-Type"] == "text/css; charset=utf-8"
    assert b"@media (max-width: 640px)" in css.content
    assert css["X-Content-Type-Options"] == "nosniff"


def test_a_url_naming_the_current_digest_is_cached_as_immutable(client):
    found = assets.asset("tidemark.css")
    current = client.get(f"/assets/tidemark.css?v={found.digest}")
    assert current["Cache-Control"] == f"public, max-age={assets.IMMUTABLE_MAX_AGE}, immutable"
    assert current["ETag"] == f'"{found.digest}"'
    # An outdated digest (a page cached across a release) gets today's file, briefly cached.
    outdated = client.get("/assets/tidemark.css?v=000000000000")
    assert outdated.content == found.body
    assert outdated["Cache-Control"] == f"public, max-age={assets.MAX_AGE}"
    again = client.get("/assets/tidemark.css", HTTP_IF_NONE_MATCH=f'"{found.digest}"')
    assert again.status_code == 304 and again.content == b""
    changed = client.get("/assets/tidemark.css", HTTP_IF_NONE_MATCH='"000000000000"')
    assert changed.status_code == 200


@pytest.mark.parametrize("name", ["nothing.css", "..%2Fassets.py", "tidemark.css.bak"])
def test_only_the_assets_are_served(client, name):
    assert client.get(f"/assets/{name}").status_code == 404


def test_assets_are_read_only(client):
    assert client.post("/assets/tidemark.css").status_code == 405
    assert client.head("/favicon.ico").status_code == 200


def test_the_digest_follows_the_file(tmp_path, settings, monkeypatch):
    """With DEBUG an edited stylesheet is served at once, under a new digest."""
    settings.DEBUG = True
    monkeypatch.setattr(assets, "ASSETS_DIR", tmp_path)
    (tmp_path / "tidemark.css").write_text("body { color: red; }")
    before = assets.asset_url("tidemark.css")
    (tmp_path / "tidemark.css").write_text("body { color: blue; }")
    assert assets.asset_url("tidemark.css") != before
    assert assets.asset("tidemark.css").body == b"body { color: blue; }"


@pytest.mark.parametrize(
    ("urlconf", "path"),
    [
        ("config.urls", "/accounts/login/"),
        ("config.urls", "/oncall/login"),
        ("config.urls_watchdog", "/oncall/login"),
    ],
)
def test_every_layout_links_the_same_stylesheet_and_favicons(settings, urlconf, path):
    settings.ROOT_URLCONF = urlconf
    client = Client()
    html = client.get(path).content.decode()
    css = assets.asset_url("tidemark.css")
    assert f'<link rel="stylesheet" href="{css}">' in html
    assert '<link rel="icon" href="/favicon.svg" type="image/svg+xml">' in html
    assert '<link rel="icon" href="/favicon.ico"' in html
    for link in (css, "/favicon.svg", "/favicon.ico"):
        assert client.get(link).status_code == 200, link
    assert '<header class="top">' in html and "Tidemark" in html
