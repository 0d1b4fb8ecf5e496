"""moto's S3 server as a storage source, for the catalog's poll and the watchdog's storage
check (the server itself is the session fixture ``moto_endpoint`` in ``tests/conftest.py``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

S3_KEY = "test"
S3_SECRET = "test"


@dataclass
class S3Store:
    """One bucket of moto's S3 server, as a storage source sees it.

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
        """A storage sources entry for this store (``TIDEMARK_STORAGE_SOURCES`` or
        ``WATCHDOG_STORAGE_SOURCES``)."""
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
