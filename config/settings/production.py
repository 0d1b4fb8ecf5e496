"""Production: every secret and address must come from the environment."""

from .base import *  # noqa: F403
from .base import _database, _prepare_threshold, env

SECRET_KEY = env.str("DJANGO_SECRET_KEY")
TIDEMARK_ENCRYPTION_KEYS = env.list("TIDEMARK_ENCRYPTION_KEYS")
env.str("DATABASE_URL")  # required: production never falls back to the embedded SQLite
DATABASES["default"] = _database(  # noqa: F405 - the same tuning as every other mode
    "DATABASE_URL",
    "catalog.sqlite3",
    server_side_binding=env.bool("DATABASE_SERVER_SIDE_BINDING", default=True),
    prepare_threshold=_prepare_threshold("DATABASE_PREPARE_THRESHOLD"),
)
DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
