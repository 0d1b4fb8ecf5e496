"""The embedded-mode suite: SQLite files and the filesystem broker, as ``make run`` uses."""

import os
import tempfile

for _name in ("DATABASE_URL", "WATCHDOG_DATABASE_URL", "CELERY_BROKER_URL"):
    os.environ.pop(_name, None)
# A developer .env must not turn the embedded suite into a PostgreSQL one.
os.environ["TIDEMARK_IGNORE_DOTENV"] = "1"
os.environ.setdefault("TIDEMARK_VAR_DIR", tempfile.mkdtemp(prefix="tidemark-embedded-"))

from .base import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Test receivers listen on loopback over plain HTTP.
TIDEMARK_OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8", "::1/128"]
TIDEMARK_OUTBOUND_ALLOW_HTTP = True

# Anyone may read /metrics in the tests (the access modes' tests override it).
TIDEMARK_METRICS = "open"
