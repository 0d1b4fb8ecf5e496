"""Tidemark's REST APIs as a client sees them: one httpx client per team key."""

from __future__ import annotations

from typing import Any

import httpx

from .progress import DemoFailed


class Api:
    """Calls with one bearer token; an unexpected status is a ``DemoFailed`` naming the
    call and the problem body."""

    def __init__(self, base_url: str, token: str, *, who: str) -> None:
        self.who = who
        self.client = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        self.calls = 0

    def request(
        self, method: str, path: str, *, expect: tuple[int, ...] = (200, 201), **kwargs
    ) -> Any:
        self.calls += 1
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise DemoFailed(f"{self.who}: {method} {path}: {exc!r}") from exc
        if response.status_code not in expect:
            raise DemoFailed(
                f"{self.who}: {method} {path} answered {response.status_code}: {response.text}"
            )
        return response.json() if response.content else None

    def get(self, path: str, **kwargs) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, json: Any = None, **kwargs) -> Any:
        return self.request("POST", path, json=json, **kwargs)

    def all(self, path: str, **params) -> list[dict]:
        """Every row of a cursor-paginated list."""
        rows: list[dict] = []
        params = {**params, "page_size": 500}
        while True:
            page = self.get(path, params=params)
            rows += page["results"]
            if not page.get("next"):
                return rows
            params = dict(httpx.URL(page["next"]).params)

    def close(self) -> None:
        self.client.close()
