"""``Client``: Tidemark's REST API (``/api/v1/``) from Python.

    from tidemark_client import Client

    with Client() as tidemark:            # TIDEMARK_URL and TIDEMARK_API_KEY
        tidemark.publish("s3://lake", "raw/orders", "2026-11-28")
        tidemark.wait_ready(tidemark.dataset("s3://lake/raw/orders").id, "2026-11-28",
                            timeout=3600)

Every error answer is raised as ``ProblemError`` (the RFC 9457 document's type, title,
detail and offending fields); 429 and 503 are retried as ``Retry-After`` says
(``retries.RetryPolicy``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx

from . import __version__, retries
from .errors import PartitionFailed, ProblemError, TidemarkError, TransportError, WaitTimeout
from .models import Dataset, DatasetRef, Partition, PublishResult
from .retries import RetryPolicy

API_PREFIX = "/api/v1"
USER_AGENT = f"tidemark-client/{__version__}"
# Answers that mean "not now" to a waiting consumer, not "never": it keeps waiting.
_TRANSIENT = frozenset({408, 425, 429, 500, 502, 503, 504})


class Client:
    """A connection to one Tidemark catalog.

    Args:
        url: the catalog's base URL (``https://tidemark.example.com``); default
            ``TIDEMARK_URL``. ``/api/v1`` is added to it.
        api_key: a team API key (``tm_...``); default ``TIDEMARK_API_KEY``.
        timeout: seconds for each request (connect, read and write each).
        retry: how 429, 503 and transient failures are retried.
        transport: an ``httpx`` transport (tests, proxies).
        sleep: how the client waits (seconds); tests pass a recorder.

    Raises:
        TidemarkError: no URL given and ``TIDEMARK_URL`` unset.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url = url or os.environ.get("TIDEMARK_URL")
        if not url:
            raise TidemarkError("no Tidemark URL: pass url= or set TIDEMARK_URL")
        api_key = api_key if api_key is not None else os.environ.get("TIDEMARK_API_KEY")
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.url + API_PREFIX, headers=headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- requests -------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send one API request (``path`` under ``/api/v1``) with the client's retries.

        Args:
            idempotent: whether repeating it is harmless (default: only for GET and HEAD).
            kwargs: what ``httpx.Client.build_request`` takes (``json``, ``params``,
                ``content``, ``headers``).

        Returns:
            The answer, of a status below 400.

        Raises:
            ProblemError: an answer of 400 or above.
            TransportError: no answer.
        """
        request = self._http.build_request(method, path, **kwargs)
        if idempotent is None:
            idempotent = method.upper() in ("GET", "HEAD")
        response = retries.send(
            self._http, request, policy=self.retry, idempotent=idempotent, sleep=self._sleep
        )
        retries.raise_for_problem(response)
        return response

    # --- reads ----------------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        """Who the API key acts for: ``{team: {slug, name}, key: {...}}``."""
        return self.request("GET", "/me").json()

    def datasets(self, **filters: str) -> Iterator[Dataset]:
        """Every dataset matching ``filters`` (``owner``, ``namespace``, ``name``,
        ``criticality``, ``lifecycle``, ``q``), following the cursor pages."""
        params: dict[str, str] = {k: v for k, v in filters.items() if v}
        params.setdefault("page_size", "500")
        path: str | None = "/datasets"
        while path is not None:
            page = self.request("GET", path, params=params).json()
            for item in page["results"]:
                yield Dataset.from_json(item)
            path, params = page.get("next"), {}
            if path is not None:
                path = path.split(API_PREFIX, 1)[-1]  # an absolute URL on this server

    def dataset(self, ref: int | str | DatasetRef) -> Dataset:
        """One dataset, by id, by its URI (``s3://lake/raw/orders``) or by ``DatasetRef``.

        Raises:
            ValueError: ``ref`` is neither an id nor a dataset URI.
            ProblemError: 404 ``dataset_not_found``; by identity, a problem built here
                with the same code, naming ``namespace`` and ``name``.
        """
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            return Dataset.from_json(self.request("GET", f"/datasets/{int(ref)}").json())
        ref = ref if isinstance(ref, DatasetRef) else DatasetRef.parse(ref)
        found = list(self.datasets(namespace=ref.namespace, name=ref.name))
        if len(found) != 1:
            raise ProblemError(
                404,
                {
                    "type": "/problems/dataset-not-found",
                    "title": "Dataset not found",
                    "detail": f"no dataset {ref} is catalogued (or this key may not read it)",
                    "code": "dataset_not_found",
                    "errors": [{"field": "dataset", "rule": "exists", "detail": str(ref)}],
                },
            )
        return found[0]

    def partition(self, dataset_id: int, key: str) -> Partition | None:
        """A dataset's partition, or None while it has never been published (404
        ``partition_not_found``)."""
        try:
            response = self.request("GET", f"/datasets/{dataset_id}/partitions/{quote(key)}")
        except ProblemError as exc:
            if exc.code == "partition_not_found":
                return None
            raise
        return Partition.from_json(response.json())

    # --- writes ---------------------------------------------------------------------------

    def publish(
        self,
        namespace: str,
        name: str,
        partition: str = "",
        *,
        state: str = "ready",
        version: str | None = None,
        code_version: str | None = None,
        metadata: dict[str, Any] | None = None,
        manifest: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        use_idempotency_key: bool = True,
    ) -> PublishResult:
        """Publish a partition's readiness (``POST /api/v1/readiness``).

        Args:
            partition: the key in the dataset's partitioning format ("" when
                unpartitioned).
            state: ``ready`` or ``failed``.
            idempotency_key: the ``Idempotency-Key`` to send; by default a new random
                one, the same for every retry of this call, so a retried publish is
                recorded once (the server replays its first answer to the same key and
                body for 48 hours). Pass a key derived from the run (an orchestrator's
                run id) to make a re-run of the same task a replay too.
            use_idempotency_key: False sends none.

        Raises:
            ProblemError: the publish was refused (404 ``dataset_not_found`` with a
                ``suggestion``, 400 naming ``partition``, 409, 422 ...).
        """
        body: dict[str, Any] = {"namespace": namespace, "name": name, "partition": partition}
        body["state"] = state
        for field, value in (
            ("version", version),
            ("code_version", code_version),
            ("metadata", metadata),
            ("manifest", manifest),
        ):
            if value is not None:
                body[field] = value
        key = (idempotency_key or str(uuid.uuid4())) if use_idempotency_key else None
        headers = {"Idempotency-Key": key} if key else {}
        response = self.request(
            "POST", "/readiness", json=body, headers=headers, idempotent=key is not None
        )
        return PublishResult.from_answer(
            response.json(),
            status_code=response.status_code,
            replayed=response.headers.get("Idempotent-Replayed") == "true",
            key=key,
        )

    def apply(
        self, document: bytes | str, *, content_type: str = "application/yaml", dry_run: bool
    ) -> dict[str, Any]:
        """Bring the team's datasets to a declaration (``POST /api/v1/catalog/apply``).

        Args:
            document: the declaration, YAML or JSON (``team`` + ``datasets``).
            content_type: ``application/yaml`` or ``application/json``.
            dry_run: True only returns the plan; False applies it, all or nothing.

        Returns:
            The plan: ``{team, dry_run, changed, datasets: [{namespace, name, action,
            changes: {field: {old, new}}, warnings}], not_declared}``.
        """
        response = self.request(
            "POST",
            "/catalog/apply",
            params={"dry_run": "true" if dry_run else "false"},
            content=document.encode() if isinstance(document, str) else document,
            headers={"Content-Type": content_type},
            idempotent=True,  # an upsert: applying twice is applying once
        )
        return response.json()

    # --- waiting --------------------------------------------------------------------------

    def wait_ready(
        self,
        dataset_id: int,
        key: str,
        *,
        timeout: float,
        interval: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        on_poll: Callable[[Partition | None, Exception | None], None] | None = None,
    ) -> Partition:
        """Poll a partition until it is ready.

        A partition that does not exist yet, is pending, or cannot be read for a transient
        reason (no answer, 408, 425, 429, 5xx) is waited for; any other problem (401, 403,
        404 ``dataset_not_found``) is raised at once.

        Args:
            timeout: seconds to wait in all; interval: seconds between polls (the last is
                cut short to poll once more at the timeout).
            on_poll: called after each poll with the partition (None: not published yet)
                or the transient error.

        Returns:
            The ready partition.

        Raises:
            PartitionFailed: its current revision is ``failed``.
            WaitTimeout: not ready when ``timeout`` seconds had passed.
            ProblemError: a problem that waiting will not cure.
        """
        deadline = clock() + timeout
        last_state: str | None = None
        while True:
            error: Exception | None = None
            found: Partition | None = None
            try:
                found = self.partition(dataset_id, key)
                last_state = found.state if found else "missing"
            except ProblemError as exc:
                if exc.status not in _TRANSIENT:
                    raise
                error = exc
            except TransportError as exc:
                error = exc
            if on_poll is not None:
                on_poll(found, error)
            if found is not None and found.state == "ready":
                return found
            if found is not None and found.state == "failed":
                raise PartitionFailed(found)
            remaining = deadline - clock()
            if remaining <= 0:
                raise WaitTimeout(key, timeout, last_state)
            self._sleep(min(interval, remaining))
