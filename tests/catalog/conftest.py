"""Fixtures for the catalog tests: moto's S3 server on loopback and a temp-directory source
for the fallback poll, a private Redis broker for worker tests.

The server runs in this process (``ThreadedMotoServer``) on a spare port, once per session
(its start costs about a second); ``s3`` and ``s3_bucket`` reset it for each test that asks.
moto is imported only when a test asks for S3, so the rest of the suite never pays for it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

S3_KEY = "test"
S3_SECRET = "test"


@dataclass
class S3Store:
    """One bucket of moto's S3 server, as a storage source of the poll sees it.

    ``put`` and ``put_many`` take keys relative to the source's root (``bucket/root``).
    """

    endpoint_url: str
    bucket: str
    root: str
    client: object  # a boto3 S3 client (boto3 has no importable client class)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.root}"

    def options(self, **extra) -> dict:
        """s3fs options for this store: moto's credentials and endpoint."""
        return {"key": S3_KEY, "secret": S3_SECRET, "endpoint_url": self.endpoint_url, **extra}

    def source(self, **extra) -> dict:
        """A ``TIDEMARK_STORAGE_SOURCES`` entry for this store."""
        return {"url": self.url, "options": self.options(**extra)}

    def key(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def put(self, relative: str, body: bytes = b"x") -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.key(relative), Body=body)

    def put_many(self, relatives: list[str], body: bytes = b"") -> None:
        """Store many objects at once.

        A PUT through moto's server costs ~6 ms, so thousands take many seconds. The server
        runs in this process, so its S3 backend is written directly (1,500 keys in ~25 ms);
        what the poll reads still goes over HTTP. Should moto's internals move, this falls
        back to PUTs from a few threads.
        """
        backend = _in_process_s3_backend()
        if backend is None:
            with ThreadPoolExecutor(max_workers=4) as pool:
                list(pool.map(lambda r: self.put(r, body), relatives))
            return
        for relative in relatives:
            backend.put_object(self.bucket, self.key(relative), body)


def _in_process_s3_backend():
    """moto's S3 backend that the in-process server answers from, or None."""
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    except (ImportError, KeyError):
        return None


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The endpoint URL of an in-process moto server on 127.0.0.1 (session-wide)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.get_host_and_port()[1]}"
    finally:
        server.stop()


def s3_client(endpoint_url: str):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=S3_KEY,
        aws_secret_access_key=S3_SECRET,
        region_name="us-east-1",
        config=Config(max_pool_connections=8, retries={"max_attempts": 1}),
    )


def reset_moto(endpoint_url: str) -> None:
    """Forget every bucket and object moto holds."""
    import httpx

    httpx.post(f"{endpoint_url}/moto-api/reset", timeout=10).raise_for_status()


def s3_store(endpoint_url: str, bucket: str, root: str) -> S3Store:
    """An ``S3Store`` on ``bucket`` (created when missing)."""
    client = s3_client(endpoint_url)
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)
    return S3Store(endpoint_url=endpoint_url, bucket=bucket, root=root, client=client)


@pytest.fixture
def s3_bucket(moto_endpoint):
    """``s3_bucket(bucket, root) -> S3Store``, on a moto server reset for this test."""
    reset_moto(moto_endpoint)
    return lambda bucket, root: s3_store(moto_endpoint, bucket, root)


@pytest.fixture
def s3(s3_bucket, settings) -> S3Store:
    """An empty moto S3 (reset first) with bucket ``tidemark-lake``, configured as the
    storage source ``lake`` (``s3://tidemark-lake/landing``)."""
    store = s3_bucket("tidemark-lake", "landing")
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": store.source()}
    return store


@pytest.fixture
def broker(tmp_path, monkeypatch):
    """A private redis-server, and this process's Celery app publishing to it."""
    from tests.catalog.worker_helpers import PrivateRedis, point_celery_at

    server = PrivateRedis.spare(tmp_path)
    restore = point_celery_at(server.url, monkeypatch)
    try:
        yield server
    finally:
        restore()
        server.kill()


@pytest.fixture
def lake(tmp_path, settings):
    """Storage source ``lake``: a temp directory (``file://``)."""
    root = tmp_path / "lake"
    root.mkdir()
    settings.TIDEMARK_STORAGE_SOURCES = {"lake": {"url": f"file://{root}"}}
    return root


@pytest.fixture
def producer(db):
    from tests.catalog.factories import TeamFactory

    return TeamFactory(slug="sales")


@pytest.fixture
def consumer_endpoint(db, producer):
    from tests.catalog.factories import EndpointFactory, TeamFactory

    return EndpointFactory(team=TeamFactory(slug="finance"))
