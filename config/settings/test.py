"""The test suite: real PostgreSQL and Redis on 127.0.0.1 unless the environment says otherwise."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tidemark")
os.environ.setdefault(
    "WATCHDOG_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tidemark_watchdog"
)
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Test receivers listen on loopback over plain HTTP.
TIDEMARK_OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8", "::1/128"]
TIDEMARK_OUTBOUND_ALLOW_HTTP = True

# Anyone may read /metrics in the tests (the access modes' tests override it, or set
# TIDEMARK_METRICS for the processes they start).
TIDEMARK_METRICS = os.environ.get("TIDEMARK_METRICS", "open")
