"""The watchdog deployed alone: its own database (``WATCHDOG_DATABASE_URL``, or a separate
SQLite file in the embedded default), URLs and WSGI entry (``config.wsgi_watchdog``), and
no catalog, lineage or Celery: it keeps paging when they are down.

Run it with ``DJANGO_SETTINGS_MODULE=config.settings.watchdog`` for ``manage.py
run_watchdog``, ``manage.py migrate`` and gunicorn ``config.wsgi_watchdog``.
"""

from .base import *  # noqa: F403
from .base import (
    SPECTACULAR_SETTINGS,
    WATCHDOG_PRUNE,
    WATCHDOG_PUBLIC_URL,
    _database,
    _metrics_mode,
    _prepare_threshold,
    env,
)

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.staticfiles",  # the API docs page's Swagger UI (drf_spectacular_sidecar)
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "httpkit",  # the on-call pages' layout, stylesheet and favicon, shared with the catalog
    "pruning",  # manage.py prune, of the watchdog's own tables
    "watchdog",
]
TIDEMARK_PRUNE_APPS = ["watchdog"]
TIDEMARK_PRUNE = WATCHDOG_PRUNE
MIDDLEWARE = [
    # First: the request id is bound for every other middleware, and every answer gets it.
    "httpkit.access.AccessLogMiddleware",
    "httpkit.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "httpkit.middleware.UnstorableInputMiddleware",
    "django.middleware.common.CommonMiddleware",
    "httpkit.outage.DatabaseUnavailableMiddleware",
]
# The on-call pages sign operators in with the watchdog's own accounts and throttle.
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
ROOT_URLCONF = "config.urls_watchdog"
# The docs page's Swagger UI is served from the installed package, with no collectstatic.
WHITENOISE_USE_FINDERS = True
# The on-call pages' cookies (sign-in, CSRF) go only over https when the watchdog is
# served over https.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool(
    "WATCHDOG_SECURE_COOKIES", default=WATCHDOG_PUBLIC_URL.startswith("https://")
)
WSGI_APPLICATION = "config.wsgi_watchdog.application"
# Deployed alone it has no DATABASE_URL: its own database's says whether it is embedded.
TIDEMARK_METRICS = _metrics_mode(embedded="WATCHDOG_DATABASE_URL" not in env)
DATABASES = {
    "default": _database(
        "WATCHDOG_DATABASE_URL",
        "watchdog.sqlite3",
        server_side_binding=env.bool("WATCHDOG_DATABASE_SERVER_SIDE_BINDING", default=True),
        prepare_threshold=_prepare_threshold("WATCHDOG_DATABASE_PREPARE_THRESHOLD"),
    )
}
DATABASE_ROUTERS = []
# The API document's own settings are watchdog.openapi's; these keep the catalog's
# (its permission class, its models' enums) from being imported here.
SPECTACULAR_SETTINGS = {
    **SPECTACULAR_SETTINGS,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "ENUM_NAME_OVERRIDES": {
        name: path
        for name, path in SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"].items()
        if path.startswith("watchdog.")
    },
}
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["watchdog.auth.TokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["httpkit.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "httpkit.exceptions.problem_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "watchdog.openapi.WatchdogAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
