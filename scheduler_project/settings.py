"""Django settings for a Takt installation.

Everything an operator changes comes from environment variables (see the
README's settings table); the defaults give a one-machine setup with SQLite
and a local Redis.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from scheduler_project.envconfig import env_bool, env_int, env_str
from scheduler_project.languages import language_code
from scheduler_project.localenv import load_local_env, source_of
from scheduler_project.logconfig import logging_config
from scheduler_project.mailconfig import email_settings
from scheduler_project.redisconfig import sentinel_config
from scheduler_project.security import (
    DEVELOPMENT_SECRET_KEY,
    SILENCED_DEPLOY_CHECKS,
    check_production,
    host_list,
    https_settings,
    login_throttle_settings,
)
from scheduler_project.takt_settings import takt_settings

BASE_DIR = Path(__file__).resolve().parent.parent
# What `make run` chose (var/local.env) for every process of this checkout;
# the environment wins. See scheduler_project/localenv.py.
TAKT_LOCAL_ENV = load_local_env(BASE_DIR)
VAR_DIR = Path(env_str("TAKT_VAR_DIR", "").strip() or BASE_DIR / "var")  # empty: the default

SECRET_KEY = env_str("DJANGO_SECRET_KEY", DEVELOPMENT_SECRET_KEY)
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = host_list(DEBUG)
# With DEBUG off: no development key, no empty host list (every process stops).
check_production(debug=DEBUG, secret_key=SECRET_KEY, allowed_hosts=ALLOWED_HOSTS)
# HTTPS behind a TLS proxy, secure cookies, HSTS: off unless the environment
# says (deploy/ does); scheduler_project/security.py.
globals().update(https_settings())
SILENCED_SYSTEM_CHECKS = SILENCED_DEPLOY_CHECKS

INSTALLED_APPS = [
    # The admin's modules load with the URLconf (scheduler_project/urls.py),
    # in the web process only: the beat and the workers never show a page,
    # and loading them cost each process about 10 MB (benchmarks/README.md).
    "django.contrib.admin.apps.SimpleAdminConfig",
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
    "simple_history",  # the audit trail (F-120, jobs/audit.py)
    "axes",  # login throttling (below)
    "jobs.apps.JobsConfig",
    "runs.apps.RunsConfig",
    "heartbeats.apps.HeartbeatsConfig",
]
# django-celery-beat (the extra takt[celery-beat]) for `manage.py
# import_celery_beat` (F-76): its models read the PeriodicTasks. Takt's own
# admin leaves its pages out (scheduler_project/urls.py).
if importlib.util.find_spec("django_celery_beat") is not None:
    INSTALLED_APPS.append("django_celery_beat")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files from STATIC_ROOT (collectstatic) in production; with
    # DEBUG on, from the apps' folders as runserver does.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The admin and the API speak the browser's language (Accept-Language)
    # when it is one of LANGUAGES, else LANGUAGE_CODE (docs/translation.md).
    "django.middleware.locale.LocaleMiddleware",
    # Date-times typed in the admin are read in the browser's zone, which
    # takt/admin.js names in a cookie (jobs/input_zone.py, F-121).
    "jobs.input_zone.BrowserTimeZoneMiddleware",
    "django.middleware.common.CommonMiddleware",
    "scheduler_project.middleware.DatabaseUnavailableMiddleware",  # a 503 while the database is down
    "jobs.api.auth.CsrfHeaderAliasMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 page.
    "axes.middleware.AxesMiddleware",
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
# `manage.py runserver` (make run's web) serves each request in a thread of
# its own that ends with it: a connection kept for CONN_MAX_AGE would stay
# open until the garbage collector found it, and on PostgreSQL a busy page
# ran the server out of connections. So it closes each at the request's end.
_PER_REQUEST_THREADS = sys.argv[1:2] == ["runserver"]
try:
    _db = dj_database_url.parse(
        env_str("DATABASE_URL", "") or _default_sqlite,
        conn_max_age=0 if _PER_REQUEST_THREADS else 60,
    )
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

# Login throttling (django-axes): TAKT_LOGIN_FAILURE_LIMIT failed logins in a
# row of one username from one address lock that pair out for
# TAKT_LOGIN_LOCKOUT_SECONDS (scheduler_project/security.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
globals().update(
    login_throttle_settings(
        failure_limit=env_int("TAKT_LOGIN_FAILURE_LIMIT", 5, minimum=1, maximum=1000),
        lockout_s=env_int("TAKT_LOGIN_LOCKOUT_SECONDS", 900, minimum=1, maximum=30 * 86400),
    )
)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# --- Language and time -----------------------------------------------------------
# English and German (docs/translation.md). The browser's Accept-Language
# picks one of LANGUAGES; DJANGO_LANGUAGE_CODE is the default for a browser
# that asks for neither, and for e-mails and commands.
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
LANGUAGE_CODE = language_code(env_str("DJANGO_LANGUAGE_CODE", "en-us"), LANGUAGES)
TIME_ZONE = env_str("TAKT_TIME_ZONE", env_str("TZ", "UTC") or "UTC")
try:
    ZoneInfo(TIME_ZONE)
except (ZoneInfoNotFoundError, ValueError):
    raise ImproperlyConfigured(f"TAKT_TIME_ZONE: unknown time zone {TIME_ZONE!r}") from None
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # collectstatic also writes .gz copies, which WhiteNoise serves to
    # browsers that accept them. No hashed names: a page rendered before
    # collectstatic ran (tests, DEBUG on) must not need a manifest.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- E-mail (alerts) ------------------------------------------------------------
# EMAIL_URL, or EMAIL_HOST/EMAIL_PORT/..., and DEFAULT_FROM_EMAIL; checked.
globals().update(email_settings())

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
# CELERY_BROKER_URL=amqp://… keeps runs on a RabbitMQ while locks and marks
# stay in Redis (docs/failures.md, "Celery on RabbitMQ").
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "") or (
    REDIS_SENTINEL.broker_url() if REDIS_SENTINEL else REDIS_URL
)
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
# Every TAKT_* setting, from the environment (else its default), checked:
# scheduler_project/takt_settings.py lists them; the README's settings
# table says what each does.
_takt = takt_settings()
globals().update(_takt)

# The REST API (F-41): the admin's session (with CSRF) or an API token. Its
# views bring these themselves (jobs.api.base), and its schema and Swagger
# UI their drf-spectacular settings (jobs.api.schema): no DEFAULT_SCHEMA_CLASS
# here, as in a project that embeds Takt (docs/embedding.md).
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "jobs.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["jobs.api.auth.ModelPermissions"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "jobs.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
# For `manage.py spectacular` and drf-spectacular's deploy check; the
# served schema has the same from jobs.api.schema.SCHEMA_SETTINGS (a test
# checks they agree).
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

# TAKT_LOG_FORMAT=json: one JSON object a line, with the run's job_id, run_id,
# trigger and worker (scheduler_project/logconfig.py; Celery's own handlers
# are switched in scheduler_project/celery.py).
LOGGING = logging_config(
    log_format=_takt["TAKT_LOG_FORMAT"], level=env_str("TAKT_LOG_LEVEL", "INFO")
)

# Owner-only when Takt makes it: the SQLite database and make run's
# var/local.env (passwords) live here. An existing folder keeps its mode
# (a systemd StateDirectory, a group-shared folder).
os.makedirs(VAR_DIR, mode=0o700, exist_ok=True)
os.makedirs(STATIC_ROOT, exist_ok=True)  # WhiteNoise warns about a missing one
