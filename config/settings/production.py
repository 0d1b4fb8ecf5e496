"""Production: every secret and address must come from the environment."""

from .base import *  # noqa: F403
from .base import env

SECRET_KEY = env.str("DJANGO_SECRET_KEY")
TIDEMARK_ENCRYPTION_KEYS = env.list("TIDEMARK_ENCRYPTION_KEYS")
DATABASES["default"] = env.db_url("DATABASE_URL")  # noqa: F405
DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
