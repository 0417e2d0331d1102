"""Django settings for a Takt installation.

Everything an operator changes comes from environment variables (see the
README's settings table); the defaults give a one-machine setup with SQLite
and a local Redis.
"""

from __future__ import annotations

import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dj_database_url
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.validators import URLValidator, validate_email

from scheduler_project.envconfig import env_bool, env_float, env_int, env_str
from scheduler_project.localenv import load_local_env, source_of
from scheduler_project.redisconfig import sentinel_config

BASE_DIR = Path(__file__).resolve().parent.parent
# What `make run` chose (var/local.env) for every process of this checkout;
# the environment wins. See scheduler_project/localenv.py.
TAKT_LOCAL_ENV = load_local_env(BASE_DIR)
VAR_DIR = Path(env_str("TAKT_VAR_DIR", "").strip() or BASE_DIR / "var")  # empty: the default

SECRET_KEY = env_str("DJANGO_SECRET_KEY", "takt-development-key-change-me-in-production")
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served locally (no CDN)
    "django_ace",  # the script editor's ACE files, served locally (no CDN)
    "jobs.apps.JobsConfig",
    "runs.apps.RunsConfig",
    "heartbeats.apps.HeartbeatsConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "scheduler_project.middleware.DatabaseUnavailableMiddleware",  # a 503 while the database is down
    "jobs.api.auth.CsrfHeaderAliasMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "scheduler_project.urls"

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
            ],
        },
    },
]

WSGI_APPLICATION = "scheduler_project.wsgi.application"

# --- Database -------------------------------------------------------------
# DATABASE_URL selects PostgreSQL (postgres://user@host:5432/name); the
# default is a SQLite file under var/.
_default_sqlite = f"sqlite:///{VAR_DIR / 'takt.sqlite3'}"
try:
    _db = dj_database_url.parse(env_str("DATABASE_URL", "") or _default_sqlite, conn_max_age=60)
except Exception as exc:  # dj-database-url raises plain ValueErrors
    raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock up front, so two beats or a
    # beat and a worker wait for each other instead of failing with
    # "database is locked" halfway through a claim. WAL lets readers go on.
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    _db["TEST"] = {"NAME": str(VAR_DIR / "test_takt.sqlite3")}
_db["CONN_HEALTH_CHECKS"] = True
if _db["ENGINE"] == "django.db.backends.postgresql":
    # A stopped server refuses at once; an unreachable one (a network
    # partition) would hold each connection attempt for minutes instead of
    # letting the beat and the workers retry (runs/outage.py).
    _db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 10)
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# --- Time -------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TAKT_TIME_ZONE", env_str("TZ", "UTC") or "UTC")
try:
    ZoneInfo(TIME_ZONE)
except (ZoneInfoNotFoundError, ValueError):
    raise ImproperlyConfigured(f"TAKT_TIME_ZONE: unknown time zone {TIME_ZONE!r}") from None
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- Redis and Celery ---------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_URL_SOURCE = source_of("REDIS_URL")  # for "cannot reach Redis at … (from …)"
# F-85: with REDIS_SENTINELS=host:port,… the broker and Takt's own Redis
# client find the master REDIS_SENTINEL_MASTER through Redis Sentinel and
# follow it after a failover; REDIS_URL is then not used. REDIS_PASSWORD
# and REDIS_DB are the master's (with Sentinel only: without, they are part
# of REDIS_URL); REDIS_SENTINEL_PASSWORD is the sentinels' own, if any.
REDIS_SENTINEL = sentinel_config(
    env_str("REDIS_SENTINELS", ""),
    master=env_str("REDIS_SENTINEL_MASTER", "mymaster").strip(),
    password=env_str("REDIS_PASSWORD", ""),
    sentinel_password=env_str("REDIS_SENTINEL_PASSWORD", ""),
    db=env_int("REDIS_DB", 0, minimum=0, maximum=100_000),
)
CELERY_BROKER_URL = REDIS_SENTINEL.broker_url() if REDIS_SENTINEL else REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Late acks, prefetch 1, no requeue of a lost pool child's message: why in
# docs/run-lifecycle.md ("Worker shutdown and the Celery settings").
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int(
    "TAKT_WORKER_PREFETCH_MULTIPLIER", 1, minimum=1, maximum=1000
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # A run that a worker took but never acknowledged is redelivered after
    # this long; the run's compare-and-set keeps a redelivery from executing
    # twice. Must exceed the longest job timeout.
    "visibility_timeout": env_int("TAKT_VISIBILITY_TIMEOUT", 43200, minimum=60, maximum=2592000),
    "queue_order_strategy": "priority",
    "sep": ":",
    "priority_steps": list(range(10)),
    **(REDIS_SENTINEL.transport_options() if REDIS_SENTINEL else {}),
}
CELERY_TASK_DEFAULT_QUEUE = "takt"
# Celery's Django fixup closes every database connection before and after
# each task unless this is set; a new PostgreSQL connection per run cost
# ~8 ms. Takt's task calls close_old_connections() itself, which keeps a
# healthy connection for CONN_MAX_AGE seconds.
CELERY_DB_REUSE_MAX = 1_000_000
CELERY_BEAT_SCHEDULER = "runs.beat:TaktScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = "UTC"

# --- Takt ---------------------------------------------------------------------
TAKT_POLL_SECONDS = env_float("TAKT_POLL_SECONDS", 1.0, minimum=0.05, maximum=60)
TAKT_DEFAULT_TIMEOUT = env_int("TAKT_DEFAULT_TIMEOUT", 300, minimum=1, maximum=7 * 86400)
TAKT_SCHEDULER_ENABLED = env_bool("TAKT_SCHEDULER_ENABLED", True)
# The beat's heartbeat name (default beat@<host>): give two beats on one host names of their own.
TAKT_BEAT_NAME = env_str("TAKT_BEAT_NAME", "").strip()
TAKT_LOCK_TTL_SECONDS = env_int("TAKT_LOCK_TTL_SECONDS", 30, minimum=3, maximum=3600)
# How often each beat looks for running runs whose worker died (F-70).
TAKT_LOST_CHECK_SECONDS = env_int("TAKT_LOST_CHECK_SECONDS", 5, minimum=1, maximum=3600)
TAKT_REPUBLISH_AFTER_SECONDS = env_int("TAKT_REPUBLISH_AFTER_SECONDS", 15, minimum=1, maximum=3600)
# Lost messages (runs/delivery.py): a published run still queued this long
# after its message went out is re-sent when its message mark is gone or
# names a worker that is gone; the beat looks every TAKT_RESEND_CHECK_SECONDS.
TAKT_RESEND_AFTER_SECONDS = env_int("TAKT_RESEND_AFTER_SECONDS", 30, minimum=1, maximum=86400)
TAKT_RESEND_CHECK_SECONDS = env_float("TAKT_RESEND_CHECK_SECONDS", 5.0, minimum=0.1, maximum=3600)
# A worker's liveness key lives this long; the worker renews it every third.
TAKT_WORKER_ALIVE_TTL_SECONDS = env_int(
    "TAKT_WORKER_ALIVE_TTL_SECONDS", 10, minimum=3, maximum=3600
)
# A cancelled running run is told to stop (SIGUSR1: SoftTimeLimitExceeded in
# the job); one still running this many seconds later is killed (SIGKILL).
TAKT_CANCEL_GRACE_SECONDS = env_int("TAKT_CANCEL_GRACE_SECONDS", 10, minimum=1, maximum=3600)
# A command job's process group that is stopped (timeout, cancel) gets
# SIGTERM, then SIGKILL this many seconds later (F-02). Below the cancel grace
# and the 30 s between a run's soft and hard time limits, so the worker
# kills the command before anything kills the worker's process.
TAKT_COMMAND_KILL_GRACE_SECONDS = env_int(
    "TAKT_COMMAND_KILL_GRACE_SECONDS", 5, minimum=1, maximum=25
)
# Script jobs (F-02 `script`): Python source edited in the admin, run on the
# workers. Off unless set: whoever may write a script may run any code as the
# worker's user (docs/job-kinds.md, "script"). Superusers only, even when on.
TAKT_SCRIPTS_ENABLED = env_bool("TAKT_SCRIPTS_ENABLED", False)
# While the database is down, a worker retries a run's claim this long (with
# backoff, at most half the run's time limit) before it sends the run again.
TAKT_DB_OUTAGE_MAX_SECONDS = env_int("TAKT_DB_OUTAGE_MAX_SECONDS", 300, minimum=1, maximum=86400)
TAKT_OUTPUT_LIMIT_BYTES = env_int(
    "TAKT_OUTPUT_LIMIT_BYTES", 256 * 1024, minimum=1024, maximum=64 * 1024 * 1024
)
# F-34: at most this many runs at once across the cluster (unset: no limit).
# Set the same value in every worker's environment.
TAKT_MAX_CONCURRENCY = env_int("TAKT_MAX_CONCURRENCY", 0, minimum=1, maximum=100_000) or None
TAKT_CLAIM_BATCH = env_int("TAKT_CLAIM_BATCH", 500, minimum=1, maximum=100000)
TAKT_JOB_MODULES = [m for m in env_str("TAKT_JOB_MODULES", "").split(",") if m]
TAKT_KEY_PREFIX = env_str("TAKT_KEY_PREFIX", "takt")
# F-52, F-71: finished runs are deleted after TAKT_RETENTION_DAYS; runs queued
# or running longer than TAKT_EXPIRE_AFTER_DAYS are failed (takt_maintenance).
TAKT_RETENTION_DAYS = env_int("TAKT_RETENTION_DAYS", 14, minimum=1, maximum=3650)
TAKT_EXPIRE_AFTER_DAYS = env_int("TAKT_EXPIRE_AFTER_DAYS", 7, minimum=1, maximum=3650)
# F-29: maintenance mode is on while this file exists where the beat runs.
TAKT_MAINTENANCE_LOCK_FILE = env_str("TAKT_MAINTENANCE_LOCK_FILE", "").strip()
# F-61: with a token, heartbeat pings need `Authorization: Bearer <token>`.
TAKT_PING_TOKEN = env_str("TAKT_PING_TOKEN", "").strip()
# F-107: with a token, /metrics needs `Authorization: Bearer <token>`.
TAKT_METRICS_TOKEN = env_str("TAKT_METRICS_TOKEN", "").strip()
# F-65: entries the decision log keeps (a capped Redis stream).
TAKT_DECISION_LOG_SIZE = env_int("TAKT_DECISION_LOG_SIZE", 100_000, minimum=100, maximum=10_000_000)
# F-43: enqueue_job(dedupe_key=...) and the API's Idempotency-Key header
# return the run made with the same key within this many seconds.
TAKT_DEDUPE_WINDOW_SECONDS = env_int(
    "TAKT_DEDUPE_WINDOW_SECONDS", 86400, minimum=1, maximum=365 * 86400
)
# F-16, F-17: the beat watches the folders of file triggers and the RUN-file
# folders (runs/watching.py), one watcher per folder in the cluster.
TAKT_WATCH_FILES = env_bool("TAKT_WATCH_FILES", True)
# Poll the folders (every second) instead of inotify: for network file
# systems, whose changes made on another machine inotify does not see.
TAKT_WATCH_POLLING = env_bool("TAKT_WATCH_POLLING", False)
# Folders where a file <prefix><job id>.RUN requests a run of that job
# (absolute paths, separated by ":"); none by default.
TAKT_RUN_FILE_FOLDERS = [
    folder.strip() for folder in env_str("TAKT_RUN_FILE_FOLDERS", "").split(":") if folder.strip()
]
for _folder in TAKT_RUN_FILE_FOLDERS:
    if not _folder.startswith("/"):
        raise ImproperlyConfigured(
            f"TAKT_RUN_FILE_FOLDERS: {_folder!r} must be an absolute path (starting with /)"
        )
TAKT_RUN_FILE_PREFIX = env_str("TAKT_RUN_FILE_PREFIX", "Takt").strip()
if not TAKT_RUN_FILE_PREFIX.replace("_", "a").replace(".", "a").replace("-", "a").isalnum() or (
    len(TAKT_RUN_FILE_PREFIX) > 50
):
    raise ImproperlyConfigured(
        f"TAKT_RUN_FILE_PREFIX: must be 1 to 50 letters, digits, '_', '.' or '-',"
        f" got {TAKT_RUN_FILE_PREFIX!r}"
    )
# Where a consumed RUN file goes: empty deletes it; a name or relative path
# is a folder inside the watched one (made when needed), e.g. "done".
TAKT_RUN_FILE_DONE_FOLDER = env_str("TAKT_RUN_FILE_DONE_FOLDER", "").strip()
# F-75: jobs declared in code, synced into the database when the beat starts
# (and by `manage.py sync_jobs`): a dict {key: job} like Celery's
# beat_schedule, in the export format of `manage.py export_jobs`; and/or a
# YAML or JSON file in that format.
TAKT_JOBS: dict[str, dict[str, object]] = {}
TAKT_JOBS_FILE = env_str("TAKT_JOBS_FILE", "").strip()

# The REST API (F-41): the admin's session (with CSRF) or an API token.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "jobs.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["jobs.api.auth.ModelPermissions"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "jobs.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Takt API",
    "DESCRIPTION": "Jobs, triggers, runs, the queue, heartbeats and alerts of a Takt installation.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "JobKindEnum": "jobs.policies.JobKind",
        "TriggerKindEnum": "jobs.policies.TriggerKind",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "jobs.api.schema.add_error_responses",
    ],
}

# Heartbeats and alerts (F-62, F-63, F-106). A heartbeat past its deadline
# is late for this long (unless it sets its own grace), then down.
TAKT_HEARTBEAT_GRACE_SECONDS = env_int(
    "TAKT_HEARTBEAT_GRACE_SECONDS", 3600, minimum=0, maximum=30 * 86400
)
TAKT_ALERT_MIN_SEVERITY = env_str("TAKT_ALERT_MIN_SEVERITY", "warning").strip().lower()
if TAKT_ALERT_MIN_SEVERITY not in ("info", "warning", "critical"):
    raise ImproperlyConfigured(
        "TAKT_ALERT_MIN_SEVERITY: expected info, warning or critical,"
        f" got {os.environ['TAKT_ALERT_MIN_SEVERITY']!r}"
    )
TAKT_ALERT_EMAILS = [a.strip() for a in env_str("TAKT_ALERT_EMAILS", "").split(",") if a.strip()]
for _address in TAKT_ALERT_EMAILS:
    try:
        validate_email(_address)
    except ValidationError:
        raise ImproperlyConfigured(
            f"TAKT_ALERT_EMAILS: not an e-mail address: {_address!r}"
        ) from None
TAKT_ALERT_WEBHOOK_URL = env_str("TAKT_ALERT_WEBHOOK_URL", "").strip()
if TAKT_ALERT_WEBHOOK_URL:
    try:
        URLValidator(schemes=["http", "https"])(TAKT_ALERT_WEBHOOK_URL)
    except ValidationError:
        raise ImproperlyConfigured(
            f"TAKT_ALERT_WEBHOOK_URL: expected an http:// or https:// URL,"
            f" got {TAKT_ALERT_WEBHOOK_URL!r}"
        ) from None
TAKT_ALERT_TIMEOUT_SECONDS = env_float("TAKT_ALERT_TIMEOUT_SECONDS", 5.0, minimum=0.1, maximum=60)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "takt": {
            "handlers": ["console"],
            "level": env_str("TAKT_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
    },
}

os.makedirs(VAR_DIR, exist_ok=True)
