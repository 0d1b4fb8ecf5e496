"""The client's pure parts: dataset URIs, ping URLs and the output tail. No server."""

from __future__ import annotations

import pytest
from tidemark_client import DatasetRef
from tidemark_client.pings import OutputTail, ping_url


@pytest.mark.parametrize(
    ("uri", "namespace", "name"),
    [
        ("s3://lake/raw/orders", "s3://lake", "raw/orders"),
        ("postgres://db:5432/shop.public.orders", "postgres://db:5432", "shop.public.orders"),
        ("kafka://broker:9092/orders.v1", "kafka://broker:9092", "orders.v1"),
        ("bigquery/project.dataset.table", "bigquery", "project.dataset.table"),
    ],
)
def test_a_dataset_uri_splits_into_namespace_and_name(uri, namespace, name):
    ref = DatasetRef.parse(uri)
    assert (ref.namespace, ref.name) == (namespace, name)


@pytest.mark.parametrize("uri", ["orders", "s3://lake", "s3://lake/", "/raw/orders", ""])
def test_a_dataset_uri_without_a_name_is_refused(uri):
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        DatasetRef.parse(uri)


@pytest.mark.parametrize(
    ("base", "suffix", "rid", "url"),
    [
        ("http://w/ping/u", "start", "r1", "http://w/ping/u/start?rid=r1"),
        ("http://w/ping/u/", "3", None, "http://w/ping/u/3"),
        ("http://w/ping/k/s?create=1", "0", "r1", "http://w/ping/k/s/0?create=1&rid=r1"),
        ("http://w/ping/u", "", None, "http://w/ping/u"),
    ],
)
def test_ping_urls_keep_the_query_and_add_the_run_id(base, suffix, rid, url):
    assert ping_url(base, suffix, rid) == url


def test_the_output_tail_keeps_the_last_bytes_across_chunks():
    tail = OutputTail(10)
    for chunk in (b"0123456789", b"abc", b"", b"defghijklmn"):
        tail.add(chunk)
    assert tail.value() == b"efghijklmn"
    assert OutputTail(0).value() == b""
