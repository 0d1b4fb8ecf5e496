"""The client address behind trusted proxies (TIDEMARK_TRUSTED_PROXY_COUNT)."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from httpkit.client_address import client_address

PROXY = "10.0.0.1"


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, None, PROXY),
        (0, "198.51.100.7", PROXY),  # no proxy trusted: the header is never believed
        (1, "198.51.100.7", "198.51.100.7"),
        (1, "203.0.113.66, 198.51.100.7", "198.51.100.7"),  # the client's own entry: ignored
        (2, "198.51.100.7, 10.0.0.2", "198.51.100.7"),
        (2, "203.0.113.66,198.51.100.7 , 10.0.0.2", "198.51.100.7"),
        (1, "2001:db8::1", "2001:db8::1"),
        (1, "2001:DB8:0:0::1", "2001:db8::1"),  # one client, one spelling
        (1, None, PROXY),  # the proxy did not add one: never a made-up key
        (1, "", PROXY),
        (2, "198.51.100.7", PROXY),  # fewer entries than proxies
        (1, "unknown", PROXY),  # not an address
        (1, "198.51.100.7:4711", PROXY),
    ],
)
def test_the_client_is_the_entry_as_many_places_from_the_right_as_there_are_proxies(
    settings, proxies, forwarded, expected
):
    settings.TIDEMARK_TRUSTED_PROXY_COUNT = proxies
    extra = {} if forwarded is None else {"HTTP_X_FORWARDED_FOR": forwarded}
    request = RequestFactory().get("/", REMOTE_ADDR=PROXY, **extra)
    assert client_address(request) == expected
