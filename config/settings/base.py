"""Settings shared by every Tidemark process, read from the environment.

Without ``DATABASE_URL`` Tidemark runs in its *embedded* mode: SQLite files under
``TIDEMARK_VAR_DIR`` (``var/`` by default) and Celery on kombu's filesystem transport, so
``make run`` needs no servers. Set ``DATABASE_URL``, ``WATCHDOG_DATABASE_URL`` and
``CELERY_BROKER_URL`` to run on PostgreSQL and Redis.
"""

import base64
import hashlib
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from httpkit.logs import LOG_FORMATS, configure_structlog, logging_config

BASE_DIR = Path(__file__).resolve().parent.parent.parent
env = environ.Env()
if not env.bool("TIDEMARK_IGNORE_DOTENV", default=False):
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("TIDEMARK_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

# Embedded mode: no servers, demo data allowed. Never true against a configured database.
EMBEDDED = "DATABASE_URL" not in env

SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="tidemark-embedded-insecure-key")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "httpkit",  # the pages' shared layout, stylesheet and favicon
    "pruning",  # retention: manage.py prune and the batch engine
    "catalog",
    "lineage",
    "watchdog",
    "api",
]

MIDDLEWARE = [
    # First: the request id is bound for every other middleware, and every answer gets it.
    "httpkit.access.AccessLogMiddleware",
    # Next, so a request's time covers every other middleware (no database, no settings).
    "httpkit.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "httpkit.middleware.UnstorableInputMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "api.middleware.RequireContentLength",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
    # Last, so its process_exception sees a view's database outage first.
    "httpkit.outage.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "config.urls"
CSRF_FAILURE_VIEW = "api.views.errors.csrf_failure"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def _database(
    url_var: str, sqlite_file: str, *, server_side_binding: bool = False, prepare_threshold=None
) -> dict:
    """One database from ``url_var``, or an embedded SQLite file tuned for many writers.

    SQLite needs WAL plus ``BEGIN IMMEDIATE``: a deferred read-then-write transaction
    cannot upgrade its lock under WAL and fails with "database is locked" at once,
    whatever the timeout.

    ``server_side_binding`` sends PostgreSQL parameters apart from the query text: the
    server then parses a statement with a fixed text, about a third of the CPU of one with
    every value inlined (the watchdog's ping statement: 0.26 ms against 0.79 ms).

    ``prepare_threshold`` (with server-side binding only): after that many executions on a
    connection, psycopg prepares a statement, so the server stops parsing and planning it
    again; a publish's two statements then cost the server about 1 ms less. ``None``
    never prepares (needed behind PgBouncer < 1.21 in transaction mode).

    PostgreSQL uses ``config.postgresql``: Django's backend, whose health check before a
    connection's reuse is skipped when the connection was used less than
    ``DATABASE_HEALTH_CHECK_DELAY`` seconds ago (1 s; 0 checks every reuse).
    """
    config = env.db_url(url_var, default=f"sqlite:///{VAR_DIR / sqlite_file}")
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    else:
        if config["ENGINE"] == "django.db.backends.postgresql":
            config["ENGINE"] = "config.postgresql"  # Django's, checking only idle connections
        config.setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=60))
        config["CONN_HEALTH_CHECKS"] = True
        config["HEALTH_CHECK_DELAY"] = env.float("DATABASE_HEALTH_CHECK_DELAY", default=1.0)
        config.setdefault("OPTIONS", {})
        # A session left idle inside a transaction would hold row locks on hot queues.
        config["OPTIONS"].setdefault("options", "-c idle_in_transaction_session_timeout=60000")
        if server_side_binding:
            config["OPTIONS"].setdefault("server_side_binding", True)
            config["OPTIONS"].setdefault("prepare_threshold", prepare_threshold)
    return config


def _prepare_threshold(var: str) -> int | None:
    """``var`` as a psycopg ``prepare_threshold``: a count >= 0 (default 5), or ``none``."""
    raw = env.str(var, default="5").strip().lower()
    if raw in ("", "none", "off"):
        return None
    value = int(raw)
    if value < 0:
        raise ValueError(f"{var} must be a count >= 0 or 'none'")
    return value


DATABASES = {
    "default": _database(
        "DATABASE_URL",
        "catalog.sqlite3",
        server_side_binding=env.bool("DATABASE_SERVER_SIDE_BINDING", default=True),
        prepare_threshold=_prepare_threshold("DATABASE_PREPARE_THRESHOLD"),
    ),
    "watchdog": _database(
        "WATCHDOG_DATABASE_URL",
        "watchdog.sqlite3",
        server_side_binding=env.bool("WATCHDOG_DATABASE_SERVER_SIDE_BINDING", default=True),
        prepare_threshold=_prepare_threshold("WATCHDOG_DATABASE_PREPARE_THRESHOLD"),
    ),
}
DATABASE_ROUTERS = ["config.routers.WatchdogRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# How many reverse proxies stand in front of the web processes, each appending to
# X-Forwarded-For: the client address (sign-in throttles, pings) is the entry that many
# places from the right (httpkit.client_address). 0: REMOTE_ADDR, no header believed.
TIDEMARK_TRUSTED_PROXY_COUNT = env.int("TIDEMARK_TRUSTED_PROXY_COUNT", default=0)

# The catalog's web sign-in (and the admin's) is throttled by django-axes, in the catalog's
# database: TIDEMARK_LOGIN_FAILURES failed sign-ins for one username, or from one client
# address (httpkit.client_address), refuse further sign-ins with 429 until TIDEMARK_LOGIN_WINDOW
# seconds have passed since the last counted failure (a refused one is not counted).
# Failures are kept only that long; successful sign-ins are not recorded.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("TIDEMARK_LOGIN_FAILURES", default=10)
AXES_COOLOFF_TIME = timedelta(seconds=env.int("TIDEMARK_LOGIN_WINDOW", default=900))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False  # no banner at every start; failures are still logged
AXES_LOCKOUT_CALLABLE = "catalog.web.signin.sign_in_locked_out"
AXES_CLIENT_IP_CALLABLE = "httpkit.client_address.client_address"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:datasets"
LOGOUT_REDIRECT_URL = "login"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every start without it

# Request bodies are bounded; DRF honours this since 3.17.2 and api/ answers 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("TIDEMARK_MAX_BODY_BYTES", default=256 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["api.permissions.HasScope"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["httpkit.parsers.StrictJSONParser"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.CursorPagination",
    "DEFAULT_SCHEMA_CLASS": "api.schema.CatalogAutoSchema",
    "EXCEPTION_HANDLER": "httpkit.exceptions.problem_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "PAGE_SIZE": 50,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Tidemark API",
    "DESCRIPTION": "Dataset catalog, per-partition readiness and freshness watchdog.",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_PERMISSIONS": ["api.permissions.Public"],
    "SERVE_AUTHENTICATION": [],
    # Several models have a "kind": each choice set gets its own schema name.
    "ENUM_NAME_OVERRIDES": {
        "ClaimKindEnum": "catalog.models.Claim.Kind",
        "ChangeNoticeKindEnum": "catalog.models.ChangeNotice.Kind",
        "RestatementStateEnum": "catalog.models.Restatement.State",
        "DatasetTransferStateEnum": "catalog.models.DatasetTransfer.State",
        # The watchdog's API document (watchdog.openapi): monitors and channels too.
        "MonitorKindEnum": "watchdog.models.Monitor.Kind",
        "ChannelKindEnum": "watchdog.models.Channel.Kind",
    },
}

# Fernet keys for secrets kept encrypted at rest (webhook signing secrets); the first
# encrypts, all decrypt. Production sets them; elsewhere one is derived from SECRET_KEY.
TIDEMARK_ENCRYPTION_KEYS = env.list("TIDEMARK_ENCRYPTION_KEYS", default=[]) or [
    base64.urlsafe_b64encode(hashlib.sha256(SECRET_KEY.encode()).digest()).decode()
]

# Owner notices by email: EMAIL_URL (smtp://user:password@host:587, ...); the console
# by default, so the embedded mode prints them.
vars().update(env.email_url("EMAIL_URL", default="consolemail://"))
DEFAULT_FROM_EMAIL = env.str("TIDEMARK_FROM_EMAIL", default="tidemark@localhost")

# Consumer webhook delivery (catalog.delivery). Seconds throughout.
TIDEMARK_DELIVERY = {
    "max_attempts": env.int("TIDEMARK_DELIVERY_MAX_ATTEMPTS", default=15),
    "backoff_base_seconds": env.float("TIDEMARK_DELIVERY_BACKOFF_BASE", default=10.0),
    "backoff_cap_seconds": env.float("TIDEMARK_DELIVERY_BACKOFF_CAP", default=6 * 3600.0),
    "lease_seconds": env.int("TIDEMARK_DELIVERY_LEASE", default=60),
    "batch_size": env.int("TIDEMARK_DELIVERY_BATCH", default=50),
    "connect_timeout": 5.0,
    "read_timeout": 10.0,
    # A pass sends a claim only while its lease outlasts this plus the margin.
    "total_deadline": env.float("TIDEMARK_DELIVERY_DEADLINE", default=15.0),
    # Room a claim's lease keeps after a send, for recording its outcome.
    "lease_margin_seconds": env.float("TIDEMARK_DELIVERY_LEASE_MARGIN", default=5.0),
    # A pass claims no new batch after this long; it rings for another pass instead, so
    # the other tasks on its worker get their turn.
    "pass_seconds": env.float("TIDEMARK_DELIVERY_PASS_SECONDS", default=45.0),
    # An endpoint whose attempts all failed (retryably) for this long, at least this many
    # in a row, is disabled and its owners told. Five days, as Svix: one delivery's own
    # retries (15 attempts, 10 s doubling to 6 h) span about 23 h, so a day would disable
    # an endpoint within a single attempt window; five days span several, and a long
    # weekend's outage still recovers by itself.
    "disable_after_failing_seconds": env.int("TIDEMARK_DISABLE_AFTER", default=5 * 86400),
    "disable_after_failures": env.int("TIDEMARK_DISABLE_AFTER_FAILURES", default=5),
    # After a secret rotation the old secret keeps signing this long.
    "secret_overlap_seconds": env.int("TIDEMARK_SECRET_OVERLAP", default=24 * 3600),
    # How far back "recover since" reaches (Svix's 14 days); never beyond the dead-letter
    # retention (catalog.recovery).
    "recover_window_days": env.int("TIDEMARK_RECOVER_WINDOW_DAYS", default=14),
    # One recovery queues at most this many failed deliveries (the rest: the same
    # recovery again), in statements of the batch size, each its own transaction.
    "recover_max_per_request": env.int("TIDEMARK_RECOVER_MAX", default=10_000),
    "recover_batch_size": env.int("TIDEMARK_RECOVER_BATCH", default=1_000),
    # Deliveries sent per second to an endpoint without a rate limit of its own. High by
    # default, as webhook services leave endpoints unlimited unless asked: a morning's
    # burst to one consumer (or to the watchdog's feed, which pages) must not queue
    # behind a low default; a receiver that needs less says so (its own limit, or 429).
    "endpoint_rate_per_second": env.int("TIDEMARK_DELIVERY_ENDPOINT_RATE", default=1000),
    # Sends in flight at once in one worker process, all endpoints together, and to one
    # endpoint (catalog.sending): an endpoint that hangs until the deadline holds at most
    # its own share, never the others'.
    "concurrency": env.int("TIDEMARK_DELIVERY_CONCURRENCY", default=64),
    "endpoint_concurrency": env.int("TIDEMARK_DELIVERY_ENDPOINT_CONCURRENCY", default=4),
}
# Non-public networks outbound requests may reach (SSRF guard); empty: public only.
# The embedded demo notifies its own loopback receiver, so loopback is allowed there.
TIDEMARK_OUTBOUND_ALLOW_NETWORKS = env.list(
    "TIDEMARK_OUTBOUND_ALLOW_NETWORKS", default=["127.0.0.0/8"] if EMBEDDED else []
)
TIDEMARK_OUTBOUND_ALLOW_HTTP = env.bool("TIDEMARK_OUTBOUND_ALLOW_HTTP", default=EMBEDDED)

# Idempotency-Key records are kept at least this long (IETF httpapi idempotency draft).
# Storage the fallback poll may list. Operators define every source (datasets only name
# one), as JSON: {"lake": {"url": "s3://bucket/root", "options": {"endpoint_url": ...}}}.
# ``options`` are fsspec storage options (credentials); API callers never see them.
TIDEMARK_STORAGE_PROTOCOLS = env.list("TIDEMARK_STORAGE_PROTOCOLS", default=["s3", "file"])
TIDEMARK_STORAGE_SOURCES = env.json("TIDEMARK_STORAGE_SOURCES", default={}) or (
    {"local": {"url": f"file://{VAR_DIR / 'lake'}"}} if EMBEDDED else {}
)
# A publish or poll find of a partition whose period starts later than now plus this
# allowance (a producer's clock running a little fast) is refused, unless its dataset
# accepts future partitions.
TIDEMARK_PARTITION_CLOCK_SKEW_SECONDS = env.int("TIDEMARK_PARTITION_CLOCK_SKEW", default=300)
# A freshness or change-notice pass takes no new batch after this long and rings for
# another pass (catalog/passes.py), so other tasks on its worker get their turn.
TIDEMARK_PASS_SECONDS = env.float("TIDEMARK_PASS_SECONDS", default=45.0)
TIDEMARK_POLL = {
    # Poll-only groups: swept every min_interval, doubling while nothing new appears.
    "min_interval_seconds": env.int("TIDEMARK_POLL_MIN_INTERVAL", default=60),
    "max_interval_seconds": env.int("TIDEMARK_POLL_MAX_INTERVAL", default=3600),
    # Groups whose datasets all publish events: an hourly safety net. Every group lists all
    # its datasets at least this often; the sweeps between list only those with one due.
    "safety_net_seconds": env.int("TIDEMARK_POLL_SAFETY_NET", default=3600),
    # Regular sweeps skip partitions older than this (S3 StartAfter); full sweeps do not.
    "lookback_days": env.int("TIDEMARK_POLL_LOOKBACK_DAYS", default=35),
    # Every group gets a full listing at least this often, for late backfills.
    "full_sweep_seconds": env.int("TIDEMARK_POLL_FULL_SWEEP", default=24 * 3600),
    # Regular sweeps of an S3 group whose partitions hold at most this many objects (learned
    # from its recent sweeps) list the objects with no delimiter: markers come back directly.
    "flat_max_objects": env.int("TIDEMARK_POLL_FLAT_MAX_OBJECTS", default=20),
    # A poll-only group waits at least this long per List page its last sweep cost beyond one.
    "page_interval_seconds": env.int("TIDEMARK_POLL_PAGE_INTERVAL", default=60),
    # A poll-only group is swept densely while a pending dataset is expected (p10 to p99 of
    # its arrivals of the last profile_days days) and backs off otherwise (poll_schedule).
    "profile_days": env.int("TIDEMARK_POLL_PROFILE_DAYS", default=35),
    # A rewritten marker or manifest is a restatement: this often (0: never), a group's sweep
    # also re-reads the markers of its ready partitions of the last restate_window_days;
    # a rewrite newer than restate_settle_seconds waits for the next pass (its producer's
    # own publish of the new version may be on the way).
    "restate_interval_seconds": env.int("TIDEMARK_POLL_RESTATE_INTERVAL", default=3600),
    "restate_window_days": env.int("TIDEMARK_POLL_RESTATE_WINDOW_DAYS", default=7),
    "restate_settle_seconds": env.int("TIDEMARK_POLL_RESTATE_SETTLE", default=600),
    "lease_seconds": env.int("TIDEMARK_POLL_LEASE", default=600),
    "batch_size": env.int("TIDEMARK_POLL_BATCH", default=20),
}

# The catalog's own base URL as people reach it: pages about a dataset's monitors link to
# its page there (empty: they do not).
TIDEMARK_PUBLIC_URL = env.str("TIDEMARK_PUBLIC_URL", default="http://127.0.0.1:8000")

# The watchdog (its own loop and database; see config/settings/watchdog.py to run it alone).
WATCHDOG_PUBLIC_URL = env.str("WATCHDOG_PUBLIC_URL", default="http://127.0.0.1:8001")
WATCHDOG_LOOP_SECONDS = env.float("WATCHDOG_LOOP_SECONDS", default=1.0)
WATCHDOG_PING_RATE_PER_MINUTE = env.int("WATCHDOG_PING_RATE_PER_MINUTE", default=120)
# Bytes of a ping's body kept (told to clients as the Ping-Body-Limit header), 1 to 1 MiB.
WATCHDOG_PING_BODY_LIMIT = env.int("WATCHDOG_PING_BODY_LIMIT", default=10_000)
# ?create=1 on a slug URL creates no monitor for an owner that has this many already.
WATCHDOG_AUTO_CREATE_LIMIT = env.int("WATCHDOG_AUTO_CREATE_LIMIT", default=500)
# A ping naming a partition whose period starts more than this after now is refused (the
# watchdog's own copy of TIDEMARK_PARTITION_CLOCK_SKEW: it reads no catalog setting).
WATCHDOG_PARTITION_CLOCK_SKEW_SECONDS = env.int("WATCHDOG_PARTITION_CLOCK_SKEW", default=300)
# Its own dead-man's switch (another watchdog, or any healthchecks-style URL).
WATCHDOG_HEARTBEAT_URL = env.str("WATCHDOG_HEARTBEAT_URL", default="")
WATCHDOG_HEARTBEAT_SECONDS = env.int("WATCHDOG_HEARTBEAT_SECONDS", default=60)
# Paged once when Tidemark itself is degraded (its system monitors), as JSON:
# [{"kind": "pagerduty", "target": "<routing key>"}] (also slack, webhook, email).
WATCHDOG_OPERATORS_CHANNELS = env.json("WATCHDOG_OPERATORS_CHANNELS", default=[])
# Storage a monitor may check at its deadline (the expected partition's success marker),
# defined only by operators, as TIDEMARK_STORAGE_SOURCES is for the catalog:
# {"lake": {"url": "s3://bucket/root", "options": {...fsspec storage options}}}.
# The watchdog's own setting: a standalone watchdog reads no catalog setting.
WATCHDOG_STORAGE_PROTOCOLS = env.list("WATCHDOG_STORAGE_PROTOCOLS", default=["s3", "file"])
WATCHDOG_STORAGE_SOURCES = env.json("WATCHDOG_STORAGE_SOURCES", default={})
# The catalog's side: where the watchdog's REST API is and the token it holds to manage
# monitors (embedded: the local watchdog, with the token bin/run created).
TIDEMARK_WATCHDOG_URL = env.str(
    "TIDEMARK_WATCHDOG_URL", default=WATCHDOG_PUBLIC_URL if EMBEDDED else ""
)
# How often the catalog tells the watchdog again which monitors a critical dataset's data
# monitor depends on, where verified lineage changed them (catalog/watchdog_feed.py).
TIDEMARK_WATCHDOG_DEPENDENCIES_SECONDS = env.int(
    "TIDEMARK_WATCHDOG_DEPENDENCIES_SECONDS", default=300
)
_watchdog_token_file = VAR_DIR / "watchdog-token"
TIDEMARK_WATCHDOG_TOKEN = env.str("TIDEMARK_WATCHDOG_TOKEN", default="") or (
    _watchdog_token_file.read_text().strip() if EMBEDDED and _watchdog_token_file.exists() else ""
)
# Tidemark's own health, as system monitors in the watchdog (catalog/self_monitoring.py).
TIDEMARK_SELF_MONITORING = {
    "period_seconds": env.int("TIDEMARK_HEARTBEAT_PERIOD", default=60),
    "grace_seconds": env.int("TIDEMARK_HEARTBEAT_GRACE", default=120),
    "delivery_lag_seconds": env.int("TIDEMARK_DELIVERY_LAG_ALERT", default=600),
    "poll_lag_seconds": env.int("TIDEMARK_POLL_LAG_ALERT", default=900),
    "freshness_lag_seconds": env.int("TIDEMARK_FRESHNESS_LAG_ALERT", default=300),
    "lineage_lag_seconds": env.int("TIDEMARK_LINEAGE_LAG_ALERT", default=900),
    "change_notice_lag_seconds": env.int("TIDEMARK_CHANGE_NOTICE_LAG_ALERT", default=900),
}
WATCHDOG_PAGING = {
    "pagerduty_url": env.str(
        "WATCHDOG_PAGERDUTY_URL", default="https://events.pagerduty.com/v2/enqueue"
    ),
    "batch_size": env.int("WATCHDOG_PAGE_BATCH", default=50),
    "lease_seconds": env.int("WATCHDOG_PAGE_LEASE", default=60),
    "deadline_seconds": env.float("WATCHDOG_PAGE_DEADLINE", default=10.0),
    "max_attempts": env.int("WATCHDOG_PAGE_MAX_ATTEMPTS", default=12),
    "backoff_base_seconds": env.float("WATCHDOG_PAGE_BACKOFF_BASE", default=5.0),
    "backoff_cap_seconds": env.float("WATCHDOG_PAGE_BACKOFF_CAP", default=600.0),
    # More due triggers than this for one channel in one cycle go out as one grouped page.
    "group_threshold": env.int("WATCHDOG_PAGE_GROUP_THRESHOLD", default=10),
    # Dataset triggers stay held this long after Tidemark recovers, while its workers catch
    # up on what queued during the outage (data that landed resolves without a page).
    "hold_after_recovery_seconds": env.int("WATCHDOG_HOLD_AFTER_RECOVERY", default=120),
    # A page held under an upstream's incident (watchdog/holds.py) waits this long after
    # the upstream resolves: the downstream job needs its run to catch up; only a
    # partition still missing then pages its owner.
    "hold_after_upstream_seconds": env.int("WATCHDOG_HOLD_AFTER_UPSTREAM", default=1800),
}
# The watchdog's on-call pages (/oncall/), signed in with its own operator accounts
# (manage.py create_operator). Seconds throughout. Their cookie is Secure as Django's
# session cookie is (SESSION_COOKIE_SECURE), or when the request came over https.
WATCHDOG_ONCALL = {
    # A session ends after this long without a request, and in any case after max_age.
    "idle_seconds": env.int("WATCHDOG_ONCALL_IDLE", default=12 * 3600),
    "max_age_seconds": env.int("WATCHDOG_ONCALL_MAX_AGE", default=7 * 86400),
    # Failed sign-ins allowed per username and per client address in one window.
    "login_window_seconds": env.int("WATCHDOG_ONCALL_LOGIN_WINDOW", default=900),
    "login_failures_per_user": env.int("WATCHDOG_ONCALL_LOGIN_FAILURES_USER", default=10),
    "login_failures_per_addr": env.int("WATCHDOG_ONCALL_LOGIN_FAILURES_ADDR", default=50),
}

# GET /metrics (Prometheus text format) on the catalog's server and the watchdog's: off
# (404), open, or token (Authorization: Bearer TIDEMARK_METRICS_TOKEN). Default: open in
# the embedded mode; elsewhere token when a token is set, else off.
TIDEMARK_METRICS_TOKEN = env.str("TIDEMARK_METRICS_TOKEN", default="")


def _metrics_mode(*, embedded: bool) -> str:
    """``TIDEMARK_METRICS``, checked, with the default for a process that is ``embedded``
    (no server database) or not."""
    default = "open" if embedded else ("token" if TIDEMARK_METRICS_TOKEN else "off")
    mode = env.str("TIDEMARK_METRICS", default=default).lower()
    if mode not in ("off", "open", "token"):
        raise ImproperlyConfigured(f"TIDEMARK_METRICS must be off, open or token: {mode!r}")
    if mode == "token" and not TIDEMARK_METRICS_TOKEN:
        raise ImproperlyConfigured("TIDEMARK_METRICS=token needs TIDEMARK_METRICS_TOKEN")
    return mode


TIDEMARK_METRICS = _metrics_mode(embedded=EMBEDDED)

IDEMPOTENCY_KEY_TTL_SECONDS = env.int("TIDEMARK_IDEMPOTENCY_TTL_SECONDS", default=48 * 3600)

# Retention (docs/operations.md, Retention): how long history is kept, in days. Pruning
# deletes in batches of TIDEMARK_PRUNE["batch_size"] rows, each its own transaction, every
# interval_seconds (beat, on the maintenance queue) for at most budget_seconds a run, and
# works at most duty_cycle of that time: after a batch it rests (1 - d) / d times as long as
# the batch took, so a first prune of a long backlog leaves the live workload its core.
TIDEMARK_RETENTION = {
    "succeeded_deliveries_days": env.int("TIDEMARK_RETAIN_SUCCEEDED_DELIVERIES_DAYS", default=30),
    "dead_letters_days": env.int("TIDEMARK_RETAIN_DEAD_LETTERS_DAYS", default=90),
    "notifications_days": env.int("TIDEMARK_RETAIN_NOTIFICATIONS_DAYS", default=90),
    "readiness_events_days": env.int("TIDEMARK_RETAIN_READINESS_EVENTS_DAYS", default=400),
    "lineage_events_days": env.int("TIDEMARK_RETAIN_LINEAGE_EVENTS_DAYS", default=30),
    "endpoint_success_hours_days": env.int(
        "TIDEMARK_RETAIN_ENDPOINT_SUCCESS_HOURS_DAYS", default=35
    ),
}
# Which apps' retention rules this process's pruning runs (the watchdog alone: its own).
TIDEMARK_PRUNE_APPS = ["catalog", "lineage"]
TIDEMARK_PRUNE = {
    "batch_size": env.int("TIDEMARK_PRUNE_BATCH", default=5000),
    "budget_seconds": env.float("TIDEMARK_PRUNE_SECONDS", default=20.0),
    "interval_seconds": env.int("TIDEMARK_PRUNE_INTERVAL", default=300),
    "duty_cycle": env.float("TIDEMARK_PRUNE_DUTY_CYCLE", default=0.5),
}
# The watchdog's: pings per monitor and days; resolved incidents and sent pages, days.
WATCHDOG_RETENTION = {
    "pings_per_monitor": env.int("WATCHDOG_RETAIN_PINGS", default=100),
    "pings_days": env.int("WATCHDOG_RETAIN_PINGS_DAYS", default=35),
    "incidents_days": env.int("WATCHDOG_RETAIN_INCIDENTS_DAYS", default=180),
}
# Its loop prunes at most every interval_seconds, for at most budget_seconds a cycle
# (working at most duty_cycle of it, as the catalog's).
WATCHDOG_PRUNE = {
    "batch_size": env.int("WATCHDOG_PRUNE_BATCH", default=1000),
    "budget_seconds": env.float("WATCHDOG_PRUNE_SECONDS", default=2.0),
    "interval_seconds": env.int("WATCHDOG_PRUNE_INTERVAL", default=300),
    "duty_cycle": env.float("WATCHDOG_PRUNE_DUTY_CYCLE", default=0.5),
}

# Change notices (catalog.change_notices): consumer teams that have not acknowledged a
# notice are reminded this many seconds before it takes effect (comma-separated; points
# already past when it is announced are skipped). Default: 7 days and 1 day.
TIDEMARK_CHANGE_NOTICES = {
    "reminder_seconds": env.list(
        "TIDEMARK_CHANGE_NOTICE_REMINDERS", cast=int, default=[7 * 86400, 86400]
    ),
}

# Schema observations (catalog.schema_changes): a breaking schema change notice covers a
# change seen from its effective time until this many days after it.
TIDEMARK_SCHEMA_CHANGES = {
    "notice_covers_days": env.int("TIDEMARK_SCHEMA_NOTICE_COVERS_DAYS", default=7),
}

# Runtime lineage (lineage/): OpenLineage events on POST /api/v1/lineage. An event's body
# may be at most max_event_bytes, as sent and, when gzip-compressed, once inflated (413
# beyond). Processing: the delivery outbox's lease, batch and backoff, in seconds.
TIDEMARK_LINEAGE = {
    "max_event_bytes": env.int("TIDEMARK_LINEAGE_MAX_EVENT_BYTES", default=1024 * 1024),
    "lease_seconds": env.int("TIDEMARK_LINEAGE_LEASE", default=60),
    "batch_size": env.int("TIDEMARK_LINEAGE_BATCH", default=100),
    "max_attempts": env.int("TIDEMARK_LINEAGE_MAX_ATTEMPTS", default=10),
    "backoff_base_seconds": 10.0,
    "backoff_cap_seconds": 3600.0,
}
# The Marquez-compatible read API (GET /api/v1/namespaces, /jobs, /lineage, /search ...):
# a key with the read (or governance) scope, or no key at all when this is true (for a
# Marquez web UI on a trusted network: a keyless caller then sees every team's runs).
TIDEMARK_MARQUEZ_API_PUBLIC = env.bool("TIDEMARK_MARQUEZ_API_PUBLIC", default=False)
# Lineage collectors (lineage/collectors/): pull access history from systems that keep it,
# every TIDEMARK_LINEAGE_COLLECT_SECONDS. JSON {name: config}; the only kind so far:
# {"kind": "postgres", "dsn": "host=... user=... password=...", "namespace":
#  "postgres://host:5432", "max_statements": 1000} (pg_stat_statements). Credentials live
# here (the environment), never in the catalog's tables.
TIDEMARK_LINEAGE_COLLECTORS = env.json("TIDEMARK_LINEAGE_COLLECTORS", default={})
TIDEMARK_LINEAGE_COLLECT_SECONDS = env.int("TIDEMARK_LINEAGE_COLLECT_SECONDS", default=300)
# Governance: a subscription whose team has not been seen reading its dataset for this many
# days is a stale declaration (GET /api/v1/reports/stale-declarations; ?days= overrides).
TIDEMARK_STALE_DECLARATION_DAYS = env.int("TIDEMARK_STALE_DECLARATION_DAYS", default=30)
# Arrival profiles (catalog/arrival_profiles.py): a dataset's usual arrival times are
# learned from its last this-many closed periods; a group of periods (business days,
# weekends, one weekday) needs at least MIN_PERIODS arrivals for its quantiles.
TIDEMARK_ARRIVAL_PROFILE_PERIODS = env.int("TIDEMARK_ARRIVAL_PROFILE_PERIODS", default=90)
# An SLA is compared with the arrivals once this many are counted (catalog/sla_suggestions.py).
TIDEMARK_SLA_SUGGESTION_MIN_PERIODS = env.int("TIDEMARK_SLA_SUGGESTION_MIN_PERIODS", default=14)
TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS = env.int("TIDEMARK_ARRIVAL_PROFILE_MIN_PERIODS", default=5)
# Later than usual (catalog/unusual_rule.py), for datasets without an SLA: judged once the
# profile counts MIN_PERIODS arrivals; a partition is later than usual past its period's
# end + max(p99, p50 + max(MIN_MARGIN, SPREAD_FACTOR x (p90 - p50))) of its weekday.
TIDEMARK_UNUSUALLY_LATE_MIN_PERIODS = env.int("TIDEMARK_UNUSUALLY_LATE_MIN_PERIODS", default=14)
TIDEMARK_UNUSUALLY_LATE_MIN_MARGIN_SECONDS = env.int(
    "TIDEMARK_UNUSUALLY_LATE_MIN_MARGIN_SECONDS", default=1800
)
TIDEMARK_UNUSUALLY_LATE_SPREAD_FACTOR = env.float(
    "TIDEMARK_UNUSUALLY_LATE_SPREAD_FACTOR", default=3.0
)
# At-risk forecasts (catalog/forecasts.py, catalog/at_risk.py): datasets with an SLA whose
# next deadline is within this many seconds are forecast every FORECAST_SECONDS while a
# partition due at it is awaited (each stores next_forecast_at: a pass costs what is due).
TIDEMARK_FORECAST_HORIZON_SECONDS = env.int("TIDEMARK_FORECAST_HORIZON_SECONDS", default=86400)
TIDEMARK_FORECAST_SECONDS = env.int("TIDEMARK_FORECAST_SECONDS", default=300)

# --- Celery: only a doorbell; the database holds the work (DESIGN.md principle 1) ---
CELERY_DIR = VAR_DIR / "celery"
CELERY_DIR.mkdir(exist_ok=True)  # beat keeps its schedule file here with any broker
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
# Doorbells a process rings within this many seconds of its last ring of the same task
# coalesce into one at the end of the interval (catalog/doorbell.py). Embedded: every
# commit rings, a local file write there, and the pause it puts between a publisher's
# SQLite transactions lets the other writers (the worker) in.
TIDEMARK_DOORBELL_INTERVAL = env.float(
    "TIDEMARK_DOORBELL_INTERVAL", default=0.0 if EMBEDDED else 0.05
)
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's own filesystem transport can hand a worker a half-written message file.
    CELERY_BROKER_TRANSPORT = "config.filesystem_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_DIR / "in"),
        "data_folder_out": str(CELERY_DIR / "in"),
        "staging_folder": str(CELERY_DIR / "staging"),
        "processed_folder": str(CELERY_DIR / "processed"),
        "store_processed": False,
        "control_folder": str(CELERY_DIR / "control"),
    }
else:
    _VISIBILITY_TIMEOUT = 900
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": _VISIBILITY_TIMEOUT,
        "socket_timeout": 5,
        "socket_connect_timeout": 0.5,
        "retry_on_timeout": False,
        # A doorbell is one attempt: kombu would otherwise retry the connect for seconds
        # on every publish while Redis is down.
        "max_retries": 0,
        "health_check_interval": 25,
    }
    CELERY_VISIBILITY_TIMEOUT = _VISIBILITY_TIMEOUT
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = 90
CELERY_TASK_TIME_LIMIT = 120
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker must outlive any broker outage rather than exit after 100 reconnects.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Celery 6's default, pinned: a task cut off from the broker is cancelled (its delivery
# lease expires and another worker takes it) rather than acked twice.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BEAT_SCHEDULE_FILENAME = str(CELERY_DIR / "celerybeat-schedule")
CELERY_TASK_ROUTES = {
    "catalog.tasks.deliver_due": {"queue": "delivery"},
    "catalog.tasks.evaluate_freshness": {"queue": "freshness"},
    "catalog.tasks.check_unusually_late": {"queue": "freshness"},
    "catalog.tasks.check_at_risk": {"queue": "freshness"},
    "catalog.tasks.sync_watchdog_dependencies": {"queue": "freshness"},
    "catalog.tasks.poll_storage": {"queue": "poll"},
    "lineage.tasks.process_events": {"queue": "lineage"},
    "lineage.tasks.collect_lineage": {"queue": "lineage"},
    "lineage.tasks.fold_alias_usage": {"queue": "lineage"},
    # Pruning runs for up to TIDEMARK_PRUNE["budget_seconds"]: on a queue of its own, so a
    # run never holds up the time-critical passes (deadlines, change notices).
    "catalog.tasks.prune_history": {"queue": "maintenance"},
    # Tidemark watching itself gets a queue and a worker of its own: a backlog on the
    # queues above must never hold back the heartbeat that says whether Tidemark is well.
    "catalog.tasks.heartbeat": {"queue": "housekeeping"},
}
CELERY_TASK_DEFAULT_QUEUE = "default"
# Beat runs fixed UTC intervals only; deadlines live in the database (DESIGN.md principle 3).
CELERY_BEAT_SCHEDULE = {
    "sweep-deliveries": {"task": "catalog.tasks.deliver_due", "schedule": 30.0},
    # Every 15 s: a shared deadline is judged at most 15 s after its grace ends, then in
    # one continuing pass (catalog/passes.py); an idle tick is two indexed queries.
    "evaluate-freshness": {"task": "catalog.tasks.evaluate_freshness", "schedule": 15.0},
    "poll-storage": {"task": "catalog.tasks.poll_storage", "schedule": 60.0},
    # Later than usual never pages, so a minute's delay is fine; an idle tick is one
    # indexed query (catalog/unusually_late.py).
    "check-unusually-late": {"task": "catalog.tasks.check_unusually_late", "schedule": 60.0},
    # Forecasts warn ahead of a deadline; every 5 minutes is the cadence bench/forecast.py
    # measured its lead times at.
    "check-at-risk": {
        "task": "catalog.tasks.check_at_risk",
        "schedule": float(TIDEMARK_FORECAST_SECONDS),
    },
    "send-change-notices": {"task": "catalog.tasks.send_change_notices", "schedule": 60.0},
    "sweep-lineage": {"task": "lineage.tasks.process_events", "schedule": 30.0},
    "collect-lineage": {
        "task": "lineage.tasks.collect_lineage",
        "schedule": float(TIDEMARK_LINEAGE_COLLECT_SECONDS),
    },
    "fold-alias-usage": {"task": "lineage.tasks.fold_alias_usage", "schedule": 300.0},
    # Lineage learned a new upstream: the watchdog holds pages under it from then on.
    "sync-watchdog-dependencies": {
        "task": "catalog.tasks.sync_watchdog_dependencies",
        "schedule": float(TIDEMARK_WATCHDOG_DEPENDENCIES_SECONDS),
    },
    # A heartbeat queued while the workers were down says nothing when they return: it
    # expires after one period rather than being run in a burst with all the others.
    "heartbeat": {
        "task": "catalog.tasks.heartbeat",
        "schedule": float(TIDEMARK_SELF_MONITORING["period_seconds"]),
        "options": {"expires": float(TIDEMARK_SELF_MONITORING["period_seconds"])},
    },
    # On the maintenance queue, not housekeeping: the heartbeat's queue carries nothing else.
    # Bounded by TIDEMARK_PRUNE["budget_seconds"]; what is left is pruned next time.
    "prune-history": {
        "task": "catalog.tasks.prune_history",
        "schedule": float(TIDEMARK_PRUNE["interval_seconds"]),
        "options": {"expires": float(TIDEMARK_PRUNE["interval_seconds"])},
    },
}

# Every process's logs, plain text or one JSON object per line (httpkit.logs).
TIDEMARK_LOG_FORMAT = env.str("TIDEMARK_LOG_FORMAT", default="plain")
if TIDEMARK_LOG_FORMAT not in LOG_FORMATS:
    raise ImproperlyConfigured(
        f"TIDEMARK_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}: {TIDEMARK_LOG_FORMAT!r}"
    )
LOGGING = logging_config(
    log_format=TIDEMARK_LOG_FORMAT, level=env.str("TIDEMARK_LOG_LEVEL", default="INFO")
)
configure_structlog()
