"""Who acts on the catalog: ``Actor``, the team behind a write (through an API key or a
signed-in person). Its own module, apart from the services, so that the modules the
services use (``change_notices``, ``restatements``) can name it without importing them."""

from __future__ import annotations

from dataclasses import dataclass

from .models import ApiKey, Team


@dataclass(frozen=True)
class Actor:
    """Who is acting: a team, through an API key or a signed-in person."""

    team: Team
    api_key: ApiKey | None = None
    username: str | None = None
    # Where the act came in: "api" (a request or a page) or "lineage" (a verified
    # OpenLineage run event acting as a completion signal); a ReadinessEvent's source.
    source: str = "api"

    @property
    def label(self) -> str:
        if self.api_key is not None:
            return f"key:{self.api_key.public_id}"
        return f"user:{self.username or '?'}"
