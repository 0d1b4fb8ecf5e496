"""The watchdog API's OpenAPI document: its settings (drf-spectacular's, applied over the
catalog's when the watchdog's server serves ``/api/schema/`` and when ``manage.py
spectacular --custom-settings watchdog.openapi.SPECTACULAR_SETTINGS --urlconf
config.urls_watchdog`` writes ``docs/openapi-watchdog.yaml``) and its ``wd_`` bearer
tokens as a security scheme."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from httpkit.openapi import ProblemAutoSchema

SPECTACULAR_SETTINGS = {
    "TITLE": "Tidemark watchdog API",
    "DESCRIPTION": "The freshness watchdog's own REST API, on its own server: monitors, "
    "their channels, incidents and ping keys, behind `wd_` tokens kept in the "
    "watchdog's database. Pings themselves are plain URLs (`/ping/<uuid>`, see the "
    "on-call guide).",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",
    # ENUM_NAME_OVERRIDES is not set here: drf-spectacular caches it once per process, so
    # the settings (base and watchdog) name the watchdog's enums too.
}


class WatchdogAutoSchema(ProblemAutoSchema):
    """The watchdog views' schema: problem responses as the catalog's (``httpkit.openapi``);
    lists are plain arrays (at most 500 items), as served."""


class WatchdogTokenScheme(OpenApiAuthenticationExtension):
    target_class = "watchdog.auth.TokenAuthentication"
    name = "watchdogToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A watchdog API token: `Authorization: Bearer wd_<id>_<secret>` "
            "(`manage.py create_watchdog_token <name>` on the watchdog).",
        }
